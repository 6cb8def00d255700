#!/usr/bin/env bash
# One CPU training step of a GPT-2-style decoder, fitgrad against PyTorch, in one run
# (issue 5; bench/RESULTS.md). Runs the two arms alternately, --rounds times each
# (default 2), and prints a table of the medians of each arm's per-round medians and the
# ratio fitgrad / torch, then fitgrad's peak memory against the analytic sum.
#
#   bench/compare_train_step.sh [BUILD_DIR] [--rounds=N] [--torch_python=PYTHON]
#       [--torch_attention=sdpa|composed] [--torch_coretype=NAME] [extra flags for both arms]
#
# BUILD_DIR defaults to build/. Extra flags (--steps=5, --warmup=2, --ctx=1024, --bf16, ...) go
# to both arms. The two OpenBLAS variables are unset for this command alone, as the developers'
# guide says for benchmarks. The torch arm runs in the reference environment
# (bench/reference-env.sh: PyTorch 2.15 from PyPI, MKL and oneDNN; $REFERENCE_ENV/bin/python,
# bench/reference-python.sh); --torch_python=PYTHON runs it with another interpreter instead,
# e.g. --torch_python=/usr/bin/python3 for Debian's PyTorch 1.13 (OpenBLAS), the torch of the
# older rows of bench/RESULTS.md. Each torch run prints its build (version, BLAS, oneDNN, CPU
# capability) on a `config:` line, so a log records what the number came from.
# --torch_attention picks the torch arm's attention (train_step_torch.py --attention).
#
# Note [OpenBLAS's kernel for the torch arm]
# A torch built on OpenBLAS (Debian's 1.13; PyPI's wheels use MKL) runs its fp32 matmul on
# OpenBLAS's sgemm, whose kernel OpenBLAS picks from the CPU's model. On a virtual Xeon whose
# model it does not know (`model name: Intel(R) Xeon(R) Processor`, AVX-512 + BF16) it falls
# back to its Prescott kernel, 30-45 GFLOP/s at 2048^3 on 2 cores against 200-240 for its
# Cooperlake kernel on the same machine. A torch arm on the fallback is a strawman, so
# --torch_coretype=NAME sets OPENBLAS_CORETYPE for the torch arm alone (COOPERLAKE there); the
# kernel OpenBLAS uses is printed whenever the arm's torch is built on OpenBLAS.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
build="$here/../build"
if [[ $# -gt 0 && $1 != --* ]]; then
  build="$1"
  shift
fi
rounds=2
coretype=()
args=()
torch_args=()
torch_python=
for a in "$@"; do
  case "$a" in
    --rounds=*) rounds="${a#--rounds=}" ;;
    --torch_coretype=*) coretype=("OPENBLAS_CORETYPE=${a#--torch_coretype=}") ;;
    --torch_python=*) torch_python="${a#--torch_python=}" ;;
    --torch_attention=*) torch_args+=("--attention=${a#--torch_attention=}") ;;
    *) args+=("$a") ;;
  esac
done
bench="$build/bench/train_step_bench"
[[ -x "$bench" ]] || { echo "compare_train_step: $bench not built (FITGRAD_BENCH=ON)" >&2; exit 1; }
if [[ -z $torch_python ]]; then
  # shellcheck disable=SC2034 # reference-python.sh reads it
  root="$(cd "$here/.." && pwd)"
  # shellcheck source=bench/reference-python.sh
  source "$here/reference-python.sh"
  torch_python="$ref_python"
fi

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "torch arm: $torch_python"
if "$torch_python" -c 'import sys, torch
sys.exit("openblas" not in torch.__config__.show().lower())'; then
  echo "torch arm's OpenBLAS kernel: $(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \
    "${coretype[@]}" OPENBLAS_VERBOSE=2 "$torch_python" \
    -c 'import torch; torch.ones(2, 2) @ torch.ones(2, 2)' 2>&1 | sed -n 's/^Core: //p' |
    head -n 1)"
fi
for ((r = 1; r <= rounds; r++)); do
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$bench" "${args[@]}" | tee -a "$log"
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "${coretype[@]}" \
    "$torch_python" "$here/train_step_torch.py" "${torch_args[@]}" "${args[@]}" | tee -a "$log"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

"$torch_python" - "$log" <<'EOF'
import re, statistics, sys
res = {"fitgrad": [], "torch": []}
mem = None
for line in open(sys.argv[1]):
    if line.startswith("RESULT "):
        kv = dict(f.split("=") for f in line.split()[1:])
        res[kv["arm"]].append(float(kv["median_ms"]))
    elif line.startswith("MEMORY "):
        mem = dict(f.split("=") for f in line.split()[1:])
f, t = statistics.median(res["fitgrad"]), statistics.median(res["torch"])
print()
print("| arm | step ms (median of rounds) | rounds | per-round medians |")
print("|---|---|---|---|")
print(f"| fitgrad | {f:.0f} | {len(res['fitgrad'])} | {', '.join(f'{x:.0f}' for x in res['fitgrad'])} |")
print(f"| torch | {t:.0f} | {len(res['torch'])} | {', '.join(f'{x:.0f}' for x in res['torch'])} |")
print(f"| ratio fitgrad / torch | {f / t:.2f} | | |")
if mem:
    print()
    print("| memory (MiB) | weights | grads | AdamW states | saved activations | analytic | "
          "measured peak | peak / analytic | activation peak / formula |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(f"| fitgrad | {mem['weights_mib']} | {mem['grads_mib']} | {mem['adamw_mib']} | "
          f"{mem['activations_mib']} | {mem['analytic_mib']} | {mem['peak_mib']} | "
          f"{mem['peak_ratio']} | {mem['activation_ratio']} |")
EOF
