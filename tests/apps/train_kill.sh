#!/usr/bin/env bash
# SIGKILL at random moments never costs a run its checkpoints (issue 11): a run of
# `fitgrad train` that saves every 25 steps and keeps 2 checkpoints is killed with SIGKILL
# at seeded random moments, KILLS times, and resumed from `last` after each kill. After
# every kill, every checkpoint-* directory must verify against its manifest (`fitgrad
# inspect DIR`); one more kill lands inside pruning through the fault hook (Note [Fault
# hook] in train/checkpoint_dir.cpp), and the last resume runs to the end. Every run
# that reaches the end must equal the uninterrupted run in its losses and final weights; one
# that gets there before all the kills were delivered is started over, so the number of
# kills never depends on the machine's speed.
# Usage: train_kill.sh FITGRAD_BINARY WORK_DIR [KILLS] [SEED]
set -euo pipefail
bin=$1
work=$2
kills=${3:-30}
RANDOM=${4:-7}
rm -rf "$work"
mkdir -p "$work"
awk 'BEGIN { srand(5); for (i = 0; i < 6000; i++) printf "%s%s", substr("abcdefghij", int(rand() * 10) + 1, 1 + int(rand() * 4)), (i % 12 == 11 ? "\n" : " ") }' >"$work/data.txt"
common=(--model llama-tiny --data "$work/data.txt" --seq_len 32 --per_device_train_batch_size 4
        --learning_rate 1e-3 --logging_steps 1 --eval_steps 100000 --max_steps 1500
        --save_steps 25 --save_total_limit 2 --progress plain)

"$bin" train "${common[@]}" --output_dir "$work/full" >/dev/null 2>"$work/full.err"

losses() { grep -o '"step":[0-9]*\|"loss":[-0-9.e+]*' "$1/metrics.jsonl" | paste -sd' '; }
same_as_full() {
  [[ "$(losses "$work/full")" == "$(losses "$work/killed")" ]] ||
    { echo "FAIL: the losses differ from the uninterrupted run's"; diff <(losses "$work/full" | tr ' ' '\n') <(losses "$work/killed" | tr ' ' '\n') | head; exit 1; }
  cmp "$work/full/checkpoint-1500/model.safetensors" "$work/killed/checkpoint-1500/model.safetensors" ||
    { echo "FAIL: the final weights differ"; exit 1; }
}
delivered=0
episodes=0
while true; do
  if [[ -d "$work/killed/checkpoint-1500" ]]; then
    same_as_full
    episodes=$((episodes + 1))
    ((delivered <= kills)) || break
    rm -rf "$work/killed"  # finished before enough kills: start over and keep killing
  fi
  resume=()
  # Killed before its first save: the dead run's records are there, so starting over is said.
  if ls -d "$work"/killed/checkpoint-* >/dev/null 2>&1; then
    resume=(--resume_from_checkpoint last)
  elif [[ -e "$work/killed/metrics.jsonl" ]]; then
    resume=(--overwrite_output_dir)
  fi
  set +e
  if ((delivered == kills)); then  # one kill inside pruning (Note [Fault hook])
    FITGRAD_FAULT_KILL_IN_PRUNE=1 "$bin" train "${common[@]}" --output_dir "$work/killed" "${resume[@]}" \
      >/dev/null 2>"$work/last.err"
    code=$?
    ((code == 137)) || { echo "FAIL: the pruning fault did not kill the run (exit $code)"; exit 1; }
    ls -d "$work"/killed/.pruned-checkpoint-* >/dev/null 2>&1 ||
      { echo "FAIL: no half-pruned directory was left"; exit 1; }
    delivered=$((delivered + 1))
  elif ((delivered > kills)); then  # enough kills: run to the end
    "$bin" train "${common[@]}" --output_dir "$work/killed" "${resume[@]}" >/dev/null 2>"$work/last.err"
    code=$?
    ((code == 0)) || { echo "FAIL: the last resume exited $code"; cat "$work/last.err"; exit 1; }
  else
    "$bin" train "${common[@]}" --output_dir "$work/killed" "${resume[@]}" >/dev/null 2>"$work/last.err" &
    pid=$!
    sleep "0.$((RANDOM % 6 + 1))$((RANDOM % 10))"
    killed=0
    kill -KILL "$pid" 2>/dev/null && killed=1 && delivered=$((delivered + 1))
    wait "$pid" 2>/dev/null
    code=$?
    ((killed == 1 || code == 0)) || { echo "FAIL: a run failed by itself (exit $code)"; cat "$work/last.err"; exit 1; }
  fi
  set -e
  for d in "$work"/killed/checkpoint-*; do
    [[ -e $d ]] || continue
    "$bin" inspect "$d" >/dev/null 2>"$work/inspect.err" ||
      { echo "FAIL: after kill $delivered, $d does not verify:"; cat "$work/inspect.err"; exit 1; }
  done
done
echo "PASS: $delivered kills, every checkpoint verified after each, $episodes resumed run(s) equal to the uninterrupted one"
