#!/usr/bin/env bash
# A --memory_budget too small for the model: `fitgrad train` prints the allocator's
# out-of-memory report, exits with 3 and writes no checkpoint (a fresh process, so the
# budget covers every byte the run reserves).
# Usage: train_budget.sh FITGRAD_BINARY WORK_DIR
set -euo pipefail
bin=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
head -c 20000 /dev/zero | tr '\0' 'a' >"$work/data.txt"
set +e
"$bin" train --model llama-tiny --data "$work/data.txt" --output_dir "$work/out" --seq_len 32 \
  --max_steps 5 --memory_budget 64KiB >"$work/stdout" 2>"$work/stderr"
code=$?
set -e
cat "$work/stderr"
[[ $code -eq 3 ]] || { echo "FAIL: exit code $code, expected 3"; exit 1; }
grep -q "out of memory while loading the model" "$work/stderr" || { echo "FAIL: message"; exit 1; }
grep -q "capacity: *64.00 KiB" "$work/stderr" || { echo "FAIL: no allocator report"; exit 1; }
if ls -d "$work"/out/checkpoint-* >/dev/null 2>&1; then echo "FAIL: a checkpoint was written"; exit 1; fi
[[ -s "$work/out/peak_report.txt" ]] || { echo "FAIL: no peak report"; exit 1; }
echo "PASS: out of memory reported, exit 3, no checkpoint"
