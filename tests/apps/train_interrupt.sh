#!/usr/bin/env bash
# Ctrl-C during `fitgrad train` leaves a loadable checkpoint (issue 5): start a run that
# would take minutes, send SIGINT once it has logged a few steps, and check that
#   - it exits with 130 (128 + SIGINT) after saving checkpoint-<step>,
#   - the checkpoint is complete (every file) and no temporary directory is left,
#   - `fitgrad train --resume_from_checkpoint last` loads it and runs to the end, and
#   - `fitgrad generate` loads it as a model.
# Usage: train_interrupt.sh FITGRAD_BINARY WORK_DIR
set -euo pipefail
bin=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
# 20 KB of pseudo-random words, the same on every run.
awk 'BEGIN { srand(3); for (i = 0; i < 4000; i++) printf "%s%s", substr("abcdefghij", int(rand() * 10) + 1, 1 + int(rand() * 4)), (i % 12 == 11 ? "\n" : " ") }' >"$work/data.txt"

common=(--model llama-tiny --data "$work/data.txt" --output_dir "$work/out" --seq_len 32
        --per_device_train_batch_size 4 --learning_rate 1e-3 --logging_steps 1 --eval_steps 100000
        --save_steps 0 --progress plain)
"$bin" train "${common[@]}" --max_steps 100000 >"$work/stdout" 2>"$work/stderr" &
pid=$!
for _ in $(seq 1 600); do
  if [[ $(grep -c '"loss"' "$work/out/metrics.jsonl" 2>/dev/null || true) -ge 3 ]]; then break; fi
  if ! kill -0 "$pid" 2>/dev/null; then echo "train exited early:"; cat "$work/stderr"; exit 1; fi
  sleep 0.1
done
kill -INT "$pid"
set +e
wait "$pid"
code=$?
set -e
cat "$work/stdout"
if [[ $code -ne 130 ]]; then echo "FAIL: exit code $code, expected 130"; cat "$work/stderr"; exit 1; fi
ckpt=$(ls -d "$work"/out/checkpoint-* | head -1)
for f in model.safetensors config.json fitgrad_tokenizer.json optimizer.safetensors trainer_state.json; do
  [[ -s "$ckpt/$f" ]] || { echo "FAIL: $ckpt/$f missing"; exit 1; }
done
if ls -d "$work"/out/tmp-* >/dev/null 2>&1; then echo "FAIL: temporary directory left"; exit 1; fi
step=${ckpt##*checkpoint-}
echo "interrupted at step $step: $ckpt"
"$bin" train "${common[@]}" --max_steps $((step + 2)) --resume_from_checkpoint last >"$work/resume.out"
grep -q "resumed from .*checkpoint-$step at step $step" "$work/resume.out" || { echo "FAIL: resume"; cat "$work/resume.out"; exit 1; }
"$bin" generate --model "$ckpt" --prompt "abc" --max_new_tokens 8 >/dev/null
echo "PASS: interrupted at step $step, checkpoint complete, resumed to step $((step + 2)), generate loads it"
