#!/usr/bin/env bash
# The activation peak of `fitgrad train --bf16` against the fp32 run (issue 9): gpt2-tiny's
# shape (2 layers, 64 wide, 4 heads, byte vocabulary) with a 256-position context
# (bench/gpt2_tiny_ctx256.json), seq_len 256, two steps on the embedded Austen corpus. Prints
# each run's peak of the activation category from its memory.json and their ratio.
#   bench/autocast_memory.sh [BUILD_DIR] [BATCH]     (defaults: build, 4)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build="${1:-build}"
batch="${2:-4}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
for run in fp32 bf16; do
  flag=()
  [[ $run == bf16 ]] && flag=(--bf16)
  "$build/fitgrad" train --model bench/gpt2_tiny_ctx256.json --data data/assets/austen.txt \
    --output_dir "$out/$run" --seq_len 256 --per_device_train_batch_size "$batch" --max_steps 2 \
    --save_steps 0 --logging_steps 1 --eval_steps 0 --progress plain "${flag[@]}" >/dev/null 2>&1
done
python3 - "$out" "$batch" <<'PY'
import json, sys
out, batch = sys.argv[1], sys.argv[2]
peak = {r: json.load(open(f"{out}/{r}/memory.json"))["by_category"]["activation"]["peak"]
        for r in ("fp32", "bf16")}
print(f"batch {batch}: activation peak fp32 {peak['fp32']} B, bf16 {peak['bf16']} B, "
      f"ratio {peak['bf16'] / peak['fp32']:.3f}")
PY
