#!/usr/bin/env bash
# Ctrl-C acts within seconds during a full-split evaluation (issue 11): a run evaluates the
# whole validation split of Austen after step 1 (--eval_max_batches 0, thousands of
# batches); SIGINT sent during that evaluation must end the run within 5 s with exit 130,
# and the checkpoint of step 1, the last complete optimizer step, must verify.
# Usage: train_interrupt_eval.sh FITGRAD_BINARY WORK_DIR DATA_FILE
set -euo pipefail
bin=$1
work=$2
data=$3
rm -rf "$work"
mkdir -p "$work"
cp "$data" "$work/data.txt"
"$bin" train --model llama-tiny --data "$work/data.txt" --output_dir "$work/out" --seq_len 32 \
  --per_device_train_batch_size 4 --per_device_eval_batch_size 4 --val_fraction 0.5 \
  --logging_steps 1 --eval_steps 1 --eval_max_batches 0 --max_steps 100 --save_steps 0 \
  --progress plain >"$work/stdout" 2>"$work/stderr" &
pid=$!
for _ in $(seq 1 600); do
  if [[ $(grep -c '"loss"' "$work/out/metrics.jsonl" 2>/dev/null || true) -ge 1 ]]; then break; fi
  if ! kill -0 "$pid" 2>/dev/null; then echo "FAIL: train exited early"; cat "$work/stderr"; exit 1; fi
  sleep 0.05
done
sleep 0.5  # well inside the evaluation of step 1
if grep -q eval_loss "$work/out/metrics.jsonl"; then echo "FAIL: the evaluation ended too soon"; exit 1; fi
start=$(date +%s%N)
kill -INT "$pid"
set +e
wait "$pid"
code=$?
set -e
ms=$((($(date +%s%N) - start) / 1000000))
[[ $code -eq 130 ]] || { echo "FAIL: exit code $code, expected 130"; cat "$work/stderr"; exit 1; }
((ms < 5000)) || { echo "FAIL: the run took $ms ms to act on SIGINT"; exit 1; }
"$bin" inspect "$work/out/checkpoint-1" >/dev/null || { echo "FAIL: checkpoint-1 does not verify"; exit 1; }
echo "PASS: SIGINT during the evaluation acted in $ms ms; checkpoint-1 verified"
