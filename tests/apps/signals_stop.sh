#!/usr/bin/env bash
# Every command stops within about a second of SIGINT or SIGTERM, wherever it is (issue 31,
# Note [Interruption points]): memplan while it builds a 60,000-layer model and while it
# plans a step of a 2,000-layer one, and memviz while it reads a trace of 400,000 events.
# Each must exit 128 + the signal within 3 s, print the one line that says what it did
# (memplan never claims a checkpoint), write no output, and have its progress line in
# the redirected log already (Note [Line-buffered progress]).
# Usage: signals_stop.sh FITGRAD_BINARY WORK_DIR
set -euo pipefail
bin=$1
work=$2
rm -rf "$work"
mkdir -p "$work"

gpt2_config() {  # layers, path
  printf '{"model_type": "gpt2", "vocab_size": 256, "n_positions": 64, "n_embd": 64, "n_layer": %s, "n_head": 4}\n' "$1" >"$2"
}

# stop NAME SIGNAL DELAY_S WAIT_FOR_REGEX -- COMMAND...: starts the command with its output
# redirected, waits for the regex in its stdout, then DELAY_S more, sends the signal and
# checks the exit code, the time to act and the message.
stop() {
  local name=$1 sig=$2 delay=$3 regex=$4
  shift 5
  "$@" >"$work/$name.out" 2>"$work/$name.err" &
  local pid=$!
  for _ in $(seq 1 600); do
    grep -qE "$regex" "$work/$name.out" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || { echo "FAIL $name: exited early"; cat "$work/$name.err"; exit 1; }
    sleep 0.05
  done
  grep -qE "$regex" "$work/$name.out" || { echo "FAIL $name: no progress line '$regex' in the log"; exit 1; }
  sleep "$delay"
  kill -0 "$pid" 2>/dev/null || { echo "FAIL $name: finished before the signal"; exit 1; }
  local start code ms expected
  start=$(date +%s%N)
  kill -"$sig" "$pid"
  set +e
  wait "$pid"
  code=$?
  set -e
  ms=$((($(date +%s%N) - start) / 1000000))
  expected=$([[ $sig == INT ]] && echo 130 || echo 143)
  [[ $code -eq $expected ]] || { echo "FAIL $name: exit code $code, expected $expected"; cat "$work/$name.err"; exit 1; }
  ((ms < 3000)) || { echo "FAIL $name: took $ms ms to act on SIG$sig"; exit 1; }
  grep -q "interrupted by SIG$sig: stopped" "$work/$name.err" || { echo "FAIL $name: no message"; cat "$work/$name.err"; exit 1; }
  if grep -qi checkpoint "$work/$name.err" "$work/$name.out"; then echo "FAIL $name: claims a checkpoint"; exit 1; fi
  echo "ok $name: SIG$sig acted on in $ms ms"
}

# 100,000 layers are refused before anything is built (Note [Size bounds]), by the key.
gpt2_config 100000 "$work/absurd.json"
set +e
"$bin" memplan --model "$work/absurd.json" --seq_len 16 >"$work/absurd.out" 2>"$work/absurd.err"
code=$?
set -e
[[ $code -eq 1 ]] && grep -q "n_layer = 100000 is too many layers" "$work/absurd.err" ||
  { echo "FAIL: 100,000 layers were not refused ($code)"; cat "$work/absurd.err"; exit 1; }

gpt2_config 60000 "$work/huge.json"
stop memplan-building TERM 1 '^planning' -- "$bin" memplan --model "$work/huge.json" --seq_len 16 \
  --output_dir "$work/record-huge"
[[ ! -e "$work/record-huge/memory.json" ]] || { echo "FAIL: an interrupted plan wrote its record"; exit 1; }

gpt2_config 2000 "$work/deep.json"
stop memplan-step INT 4 '^planning' -- "$bin" memplan --model "$work/deep.json" --seq_len 16 \
  --max_steps 1000

# A Chrome trace of 400,000 allocator events (alloc/free pairs).
python3 - "$work/trace.json" <<'PY'
import json, sys
n = 400000
with open(sys.argv[1], "w") as f:
    f.write('{"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x", "device": "cpu", "total_events": %d, "dropped": 0}}' % n)
    alloc = 0
    for i in range(n):
        kind = "alloc" if i % 2 == 0 else "free"
        alloc = 512 if kind == "alloc" else 0
        e = {"ph": "i", "cat": "allocator", "name": kind, "ts": i, "pid": 1, "tid": 1, "args": {
            "seq": i, "time_ns": i, "kind": kind, "category": "activation", "label": "x", "size": 512,
            "segment": 1, "offset": 0, "addr": "0x0", "allocated_after": alloc, "reserved_after": 2097152,
            "category_after": alloc}}
        f.write(",\n" + json.dumps(e))
    peak = {"allocated": 512, "reserved": 2097152, "cached_free": 0, "seq": 0, "time_ns": 0, "mark": None,
            "by_category": [{"category": "activation", "bytes": 512, "percent": 100.0}],
            "top_labels": [{"label": "x", "bytes": 512, "percent": 100.0}], "other_labels": {"count": 0, "bytes": 0}}
    f.write(",\n" + json.dumps({"ph": "i", "cat": "peak", "name": "peak", "ts": 0, "pid": 1, "tid": 1, "args": peak}))
    f.write("]}\n")
PY
stop memviz INT 0.3 '^reading' -- "$bin" memviz "$work/trace.json" -o "$work/trace.html"
[[ ! -e "$work/trace.html" ]] || { echo "FAIL: an interrupted memviz wrote its page"; exit 1; }
echo "PASS: every command stopped on its signal"
