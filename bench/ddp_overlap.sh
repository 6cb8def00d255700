#!/usr/bin/env bash
# The data-parallel overlap benchmark of issue 29: the time of one DDP (and ZeRO) step of N CPU
# ranks over Gloo against one process's step at the same per-rank batch, on this host.
#
# Each rank gets cores / N threads (Note [The launcher] in apps/launch.h), and the single
# process runs with the same budget, so both arms compute the same work per rank on the same
# threads; what a rank adds is its share of the gradient all-reduce (the whole gradient in
# buckets over loopback, Note [DDP buckets] in dist/ddp.h), overlapped with the backward
# where the buckets allow, and ZeRO's parameter broadcasts. The ratio DDP / single is the
# price of data parallelism here: 1.00 would be full overlap at no cost. On one host the N
# ranks also share the caches and the memory bandwidth, which a multi-host job would not: the
# row of N independent processes run at once measures that share alone. Gloo adds the
# gradients on its worker thread, on the same cores as the backward.
#
# Usage: bench/ddp_overlap.sh [BUILD_DIR]
#   NPROC=2 STEPS=12 MODEL=bench/quality_model.json BATCH=4 SEQ=128 WORK=/tmp/fitgrad-ddp-bench
#   in the environment. Prints one row per arm: median seconds per step over the logging
#   intervals after the first, and the ratio to the single process.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
nproc=${NPROC:-2}
steps=${STEPS:-12}
model=${MODEL:-bench/quality_model.json}
batch=${BATCH:-4}
seq=${SEQ:-128}
work=${WORK:-/tmp/fitgrad-ddp-bench}
cores=$(nproc)
threads=$((cores / nproc > 0 ? cores / nproc : 1))
rm -rf "$work"
mkdir -p "$work"

common=(--model "$model" --data data/assets/austen.txt --seq_len "$seq"
        --per_device_train_batch_size "$batch" --max_steps "$steps" --logging_steps 3
        --eval_strategy no --save_strategy no --progress plain --learning_rate 1e-3)

seconds_per_step() {  # median over the logging intervals after the first
  grep '"tokens_per_second"' "$1" | sed 's/.*"tokens_per_second":\([0-9.e+-]*\).*/\1/' |
    tail -n +2 | awk -v t=$((batch * seq)) '{ print t / $1 }' | sort -g |
    awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

run() {  # NAME COMMAND...: runs it into $work/NAME and prints its row
  local name=$1 dir
  shift
  dir="$work/${name//[^a-zA-Z0-9]/_}"
  if ! "$@" --output_dir "$dir" >"$dir.log" 2>&1; then
    echo "| $name | failed: $(tail -1 "$dir.log") |"
    return 1
  fi
  local s
  s=$(seconds_per_step "$dir/metrics.jsonl")
  [[ -z ${single:-} ]] && single=$s
  printf '| %s | %.3f | %.2f |\n' "$name" "$s" "$(awk -v a="$s" -v b="$single" 'BEGIN { print a / b }')"
}

echo "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $nproc ranks of $threads thread(s); batch $batch x $seq per rank"
echo "| arm | s/step | vs one process |"
echo "|---|---|---|"
single=
run "one process, $threads thread(s)" env OMP_NUM_THREADS="$threads" "$build/fitgrad" train "${common[@]}"
# N independent processes at once, no communication: what the ranks' sharing of the cores'
# caches and memory bandwidth costs alone, the floor of the DDP rows on one host.
contended=()
for ((k = 0; k < nproc; ++k)); do
  env OMP_NUM_THREADS="$threads" "$build/fitgrad" train "${common[@]}" --seed $((k + 1)) \
    --output_dir "$work/alone$k" >"$work/alone$k.log" 2>&1 &
  contended+=($!)
done
for pid in "${contended[@]}"; do wait "$pid"; done
s=$(for ((k = 0; k < nproc; ++k)); do seconds_per_step "$work/alone$k/metrics.jsonl"; done |
  awk '{ t += $1 } END { print t / NR }')
printf '| %s | %.3f | %.2f |\n' "$nproc processes at once, no communication" "$s" \
  "$(awk -v a="$s" -v b="$single" 'BEGIN { print a / b }')"
for arm in "ddp|" "ddp, 1 MiB buckets|--ddp_bucket_cap_mb 1" "zero-1|--zero_stage 1" "zero-2|--zero_stage 2"; do
  read -r -a extra <<<"${arm#*|}"
  run "$nproc ranks, ${arm%%|*}" "$build/fitgrad" launch --nproc_per_node "$nproc" train \
    "${common[@]}" "${extra[@]}" || true
done
