#!/usr/bin/env bash
# The input surfaces stop on a signal (issue 58, Note [Interruption points]):
#   - a chat template that loops for ever (`generate --messages`) stops within a second of
#     SIGINT (Note [Jinja render bounds]);
#   - SIGINT while instruction data is encoded stops the run at once, with no checkpoint
#     (the help: "while loading ... it stops at once and saves nothing");
#   - SIGINT while a command waits to open a FIFO (--prompt_file, --messages, --chat_template,
#     eval's --data) exits 130, not 1 "cannot open";
#   - SIGINT in a run with --save_strategy no says it saves nothing and saves nothing.
# Each must exit 130 within 3 s and print the guard's line "interrupted by SIGINT: stopped".
# Usage: input_signals.sh FITGRAD_BINARY WORK_DIR
set -euo pipefail
bin=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
model=$(dirname "${BASH_SOURCE[0]}")/../../apps/demo/model.json

# interrupt NAME DELAY_S -- COMMAND...: starts the command, sends SIGINT after DELAY_S (the
# command must still run then), and checks the exit code, the time to act and the message.
interrupt() {
  local name=$1 delay=$2
  shift 3
  "$@" >"$work/$name.out" 2>"$work/$name.err" &
  local pid=$!
  sleep "$delay"
  kill -0 "$pid" 2>/dev/null || { echo "FAIL $name: exited before the signal"; cat "$work/$name.err"; exit 1; }
  local start code ms
  start=$(date +%s%N)
  kill -INT "$pid"
  # A command that ignores the signal is killed after 10 s, and fails.
  (sleep 10; kill -KILL "$pid" 2>/dev/null) &
  local watchdog=$!
  set +e
  wait "$pid"
  code=$?
  set -e
  kill "$watchdog" 2>/dev/null || true
  ms=$((($(date +%s%N) - start) / 1000000))
  [[ $code -eq 130 ]] || { echo "FAIL $name: exit code $code, expected 130"; cat "$work/$name.err"; exit 1; }
  ((ms < 3000)) || { echo "FAIL $name: took $ms ms to act on SIGINT"; exit 1; }
  grep -q "interrupted by SIGINT: stopped" "$work/$name.err" || { echo "FAIL $name: no message"; cat "$work/$name.err"; exit 1; }
  echo "ok $name: SIGINT acted on in $ms ms"
}

chatml='{% for m in messages %}{{ "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n" }}{% endfor %}'
printf '%s' "$chatml" >"$work/chatml.jinja"
# Within the work bound (Note [Jinja render bounds]) but for many minutes: each step scans
# 50 MB of text.
printf '%s' "{% set big = ('a' * 10000) * 5000 %}{% for i in range(100000) %}{{ big | replace('x', 'y') | length }}{% endfor %}" >"$work/loop.jinja"
printf '%s' '[{"role": "user", "content": "hi"}]' >"$work/messages.json"

interrupt template-loop 1 -- "$bin" generate --model "$model" --messages "$work/messages.json" \
  --chat_template "$work/loop.jinja" --max_new_tokens 4

# 200,000 conversations take the encoder several seconds.
python3 - "$work/records.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(200000):
        f.write(json.dumps({"messages": [{"role": "user", "content": "question %d" % i},
                                         {"role": "assistant", "content": "answer %d" % i}]}) + "\n")
PY
interrupt encoding 1.5 -- "$bin" train --model "$model" --data "$work/records.jsonl" \
  --chat_template "$work/chatml.jinja" --output_dir "$work/encoding" --seq_len 64 \
  --max_steps 10 --progress plain
if ls -d "$work"/encoding/checkpoint-* >/dev/null 2>&1; then echo "FAIL encoding: a checkpoint was saved"; exit 1; fi
if grep -qi "saving a checkpoint" "$work/encoding.out" "$work/encoding.err"; then
  echo "FAIL encoding: claims a checkpoint"; exit 1
fi

mkfifo "$work/fifo"
interrupt fifo-prompt 0.5 -- "$bin" generate --model "$model" --prompt_file "$work/fifo"
interrupt fifo-messages 0.5 -- "$bin" generate --model "$model" --messages "$work/fifo"
interrupt fifo-template 0.5 -- "$bin" generate --model "$model" --messages "$work/messages.json" \
  --chat_template "$work/fifo"
interrupt fifo-eval 0.5 -- "$bin" eval --model "$model" --data "$work/fifo"

# --save_strategy no: the signal's lines say that nothing is saved.
awk 'BEGIN { srand(3); for (i = 0; i < 4000; i++) printf "%s%s", substr("abcdefghij", int(rand() * 10) + 1, 1 + int(rand() * 4)), (i % 12 == 11 ? "\n" : " ") }' >"$work/data.txt"
"$bin" train --model llama-tiny --data "$work/data.txt" --output_dir "$work/nosave" --seq_len 32 \
  --per_device_train_batch_size 4 --logging_steps 1 --eval_steps 100000 --max_steps 100000 \
  --save_strategy no --progress plain >"$work/nosave.out" 2>"$work/nosave.err" &
pid=$!
for _ in $(seq 1 600); do
  if [[ $(grep -c '"loss"' "$work/nosave/metrics.jsonl" 2>/dev/null || true) -ge 2 ]]; then break; fi
  kill -0 "$pid" 2>/dev/null || { echo "FAIL nosave: exited early"; cat "$work/nosave.err"; exit 1; }
  sleep 0.1
done
kill -INT "$pid"
set +e
wait "$pid"
code=$?
set -e
[[ $code -eq 130 ]] || { echo "FAIL nosave: exit code $code, expected 130"; cat "$work/nosave.err"; exit 1; }
if grep -qiE "saving a checkpoint|resume with" "$work/nosave.out" "$work/nosave.err"; then
  echo "FAIL nosave: claims a checkpoint:"; cat "$work/nosave.out" "$work/nosave.err"; exit 1
fi
grep -q "save_strategy no" "$work/nosave.out" "$work/nosave.err" || { echo "FAIL nosave: does not say why"; exit 1; }
if ls -d "$work"/nosave/checkpoint-* >/dev/null 2>&1; then echo "FAIL nosave: a checkpoint was saved"; exit 1; fi
echo "ok nosave: says it saved nothing"
echo "PASS: every input surface stopped on SIGINT"
