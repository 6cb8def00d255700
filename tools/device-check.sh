#!/usr/bin/env bash
# The device check of issue 15, one script for a lent GPU machine (run tool; under 8 minutes
# on an H200). It takes the pack tools/device-prepare.sh built here and:
#   1. runs the CUDA tests: the cross-backend op harness (every op x dtype on cuda:0 against
#      the CPU), the stream-ordered reuse test, pinned loader batches, and the training
#      tests on cuda:0 (CudaTrain.*);
#   2. runs bench/cuda_bench (fitgrad) and tools/device/torch_reference.py (PyTorch) on the
#      same card, and trains GPT-2 124M (T 1024, bf16, AdamW) with `fitgrad train`;
#   3. plans the same run with `fitgrad memplan --device_memory <this card>` and sets the
#      real peak beside the plan's;
#   4. times a SmolLM2-135M QLoRA step;
#   5. prints one table: each fitgrad figure, PyTorch's, and their ratio.
# Everything it measured is also left in $OUT (or ./device-check-out) as raw RESULT lines.
# Usage: bash tools/device-check.sh [pack, default build-device/pack]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
pack=${1:-build-device/pack}
out=${OUT:-device-check-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$pack/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FITGRAD_ASSETS="$PWD/data/assets"
results="$out/results.txt"
: >"$results"
say() { echo "device-check: $*"; }

if ! nvidia-smi -L >"$out/gpu.txt" 2>&1; then
  say "no GPU visible (nvidia-smi -L failed): nothing to check"
  exit 0
fi
say "$(head -1 "$out/gpu.txt")"
if ! "$pack/bin/fitgrad" --help >/dev/null 2>"$out/ldd-error.txt"; then
  say "the packed binaries do not run here: $(head -3 "$out/ldd-error.txt")"
  say "build on this machine instead (needs Eigen, fmt, CLI11, nlohmann-json and GoogleTest)"
  exit 1
fi

# 1. The CUDA tests.
tests='*BackendOps.*:*StreamReuse.*:*Loader.PinnedBatchesReachTheDevice:*CudaTrain.*'
timeout 240 "$pack/bin/fitgrad_tests" --gtest_filter="$tests" >"$out/tests.txt" 2>&1
say "tests: rc $? ($(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/tests.txt" | tr '\n' ' '))"
grep -E '^\[  FAILED  \]|Failure|error' "$out/tests.txt" | head -20

# 2. Kernels and training, fitgrad then PyTorch.
timeout 150 "$pack/bin/cuda_bench" --reps 10 2>&1 | tee "$out/cuda_bench.txt" |
  sed -n 's/^RESULT /fitgrad /p' >>"$results"
timeout 150 python3 tools/device/torch_reference.py 2>&1 | tee "$out/torch.txt" |
  sed -n 's/^RESULT /torch /p' >>"$results"
train_args=(--model gpt2 --data data/assets/austen.txt --seq_len 1024
  --per_device_train_batch_size 8 --bf16 --optim adamw_torch --learning_rate 6e-4
  --max_steps 12 --logging_steps 1 --eval_strategy no --save_strategy no)
timeout 120 "$pack/bin/fitgrad" train "${train_args[@]}" --device cuda:0 \
  --output_dir "$out/train" >"$out/train.txt" 2>&1
say "fitgrad train: rc $?"
# The steady tokens/s: the median of the logged steps after the first two.
tail -n +3 <(grep -o '[0-9]* tok/s' "$out/train.txt") | sort -n |
  awk '{v[NR]=$1} END {if (NR) print "fitgrad train gpt2.tokens_per_s", v[int((NR+1)/2)]}' >>"$results"
grep -o 'peak memory [0-9.]* [KMG]iB' "$out/train.txt" | tail -1 |
  awk '{print "fitgrad train gpt2.peak", $3, $4}' >>"$results"

# 3. The plan of the same run for this card.
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$card" in *H200*) plan_card=h200 ;; *H100*) plan_card=h100 ;; *A100*80*) plan_card=a100-80g ;;
  *A100*) plan_card=a100-40g ;; *4090*) plan_card=rtx4090 ;; *3090*) plan_card=rtx3090 ;; *) plan_card=h100 ;;
esac
timeout 60 "$pack/bin/fitgrad" memplan "${train_args[@]}" --device_memory "$plan_card" \
  >"$out/memplan.txt" 2>&1
grep -m1 'peak allocated:' "$out/memplan.txt" |
  awk '{print "memplan train gpt2.peak", $3, $4}' >>"$results"

# 4. A SmolLM2-135M QLoRA step (random weights: the time and memory do not depend on them).
timeout 90 "$pack/bin/fitgrad" train --model smollm2-135m \
  --data data/assets/austen.txt --seq_len 1024 --per_device_train_batch_size 8 --bf16 \
  --quantize nf4 --lora_r 16 --max_steps 8 --logging_steps 1 --eval_strategy no \
  --save_strategy no --device cuda:0 --output_dir "$out/qlora" >"$out/qlora.txt" 2>&1
say "qlora: rc $?"
grep -o '[0-9]* tok/s' "$out/qlora.txt" | tail -1 | awk '{print "fitgrad qlora smollm2.tokens_per_s", $1}' >>"$results"
grep -o 'peak memory [0-9.]* [KMG]iB' "$out/qlora.txt" | tail -1 |
  awk '{print "fitgrad qlora smollm2.peak", $3, $4}' >>"$results"

# 5. The table: fitgrad against PyTorch (or memplan) for each row both measured.
python3 - "$results" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    who, kind, name, *value = line.split()
    rows.setdefault((kind, name), {})[who] = " ".join(value)
print(f"{'kind':10} {'row':40} {'fitgrad':>12} {'reference':>12} {'ratio':>7}")
for (kind, name), v in sorted(rows.items()):
    mine = v.get("fitgrad", "-")
    ref = v.get("torch", v.get("memplan", "-"))
    try:
        ratio = f"{float(mine.split()[0]) / float(ref.split()[0]):.3f}"
    except (ValueError, ZeroDivisionError):
        ratio = "-"
    print(f"{kind:10} {name:40} {mine:>12} {ref:>12} {ratio:>7}")
PY
