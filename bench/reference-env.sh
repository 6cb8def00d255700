#!/usr/bin/env bash
# bench/reference-env.sh [FOLDER] — make the reference Python environment that the
# comparisons against current releases and the golden-data generators run in.
#
# It creates a virtual environment in FOLDER (default: .reference-env/ at the root of this
# checkout, which git ignores) and installs, from PyPI with pip, the releases pinned below:
# the versions a user who installs today gets (issue 60). torch comes as PyPI's default wheel
# (it pulls its nvidia-* wheels, several GB, and runs on the CPU as well). Running it again on
# a folder that already holds these versions changes nothing. The interpreter is $PYTHON, or
# python3 on PATH; it must have the venv module. At the end it prints the versions it
# imported, so a log of this script records the environment a number came from.
#
# A comparison script finds the environment as $REFERENCE_ENV (default: the same
# .reference-env/), runs $REFERENCE_ENV/bin/python, and tells how to make it when it is absent.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
folder="${1:-$root/.reference-env}"
python="${PYTHON:-python3}"

# The pins: change them here and nowhere else.
pins=(
  torch==2.15.0
  transformers==5.23.0
  peft==0.21.2
  trl==1.16.0
  accelerate==1.16.0
  datasets==5.2.0
)

if ! command -v "$python" >/dev/null; then
  echo "[reference-env] no Python interpreter '$python'; install python3 or set PYTHON" >&2
  exit 1
fi
if [ ! -x "$folder/bin/python" ]; then
  echo "[reference-env] creating a virtual environment in $folder with $("$python" --version)"
  "$python" -m venv "$folder" || {
    echo "[reference-env] '$python -m venv' failed: install the venv module (Debian: apt-get install python3-venv)" >&2
    exit 1
  }
fi
"$folder/bin/python" -m pip install --quiet --upgrade pip
echo "[reference-env] installing ${pins[*]}"
"$folder/bin/python" -m pip install --quiet "${pins[@]}"
"$folder/bin/python" - <<'PY'
import accelerate, datasets, peft, torch, transformers, trl
for m in (torch, transformers, peft, trl, accelerate, datasets):
    print(f"[reference-env] {m.__name__} {m.__version__}")
print(f"[reference-env] torch CPU capability: {torch.backends.cpu.get_cpu_capability()}")
PY
echo "[reference-env] ready: $folder/bin/python"
