#!/usr/bin/env bash
# 200-step `fitgrad train` runs on the Austen corpus, one per optimizer and precision of
# issue 12 (and issue 28's --weights_int8), on the demo's 3M-parameter byte-level Llama (apps/demo/model.json): prints
# each run's validation loss at steps 50 and 200 and its optimizer state from the ledger.
# Usage: bench/optimizer_runs.sh [BUILD_DIR] [STEPS]   (about 2 minutes per run on 2 cores)
set -euo pipefail
build=${1:-build}
steps=${2:-200}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
common=(--model apps/demo/model.json --data data/assets/austen.txt --seq_len 128
        --per_device_train_batch_size 16 --max_steps "$steps" --logging_steps 50
        --eval_steps 50 --eval_max_batches 8 --save_strategy no --progress plain --seed 42)
adam=(--learning_rate 2e-3 --lr_scheduler_type cosine --warmup_steps 30 --weight_decay 0.1)
runs=(
  "adamw_torch fp32|--optim adamw_torch ${adam[*]}"
  "adafactor fp32|--optim adafactor --learning_rate 1e-2 --lr_scheduler_type constant"
  "adafactor_hf fp32|--optim adafactor_hf"
  "adamw_8bit fp32|--optim adamw_8bit ${adam[*]}"
  "adamw_torch fp16|--optim adamw_torch --fp16 ${adam[*]}"
  "adamw_torch pure_bf16+sr|--optim adamw_torch --pure_bf16 --stochastic_rounding ${adam[*]}"
  "adamw_torch pure_bf16|--optim adamw_torch --pure_bf16 ${adam[*]}"
  "adamw_torch int8 bf16|--optim adamw_torch --weights_int8 --bf16 ${adam[*]}"
  "adamw_torch int8 pure_bf16+sr|--optim adamw_torch --weights_int8 --pure_bf16 --stochastic_rounding ${adam[*]}"
)
printf '| %-26s | %-14s | %-15s | %s |\n' "run" "eval loss @50" "eval loss @$steps" "optimizer state (ledger)"
for run in "${runs[@]}"; do
  name=${run%%|*}
  read -r -a flags <<<"${run#*|}"
  dir="$out/${name// /_}"
  "$build/fitgrad" train "${common[@]}" "${flags[@]}" --output_dir "$dir" >"$dir.log" 2>&1 ||
    { echo "$name failed:"; tail -5 "$dir.log"; exit 1; }
  first=$(grep -o '"eval_loss":[0-9.]*' "$dir/metrics.jsonl" | head -1 | cut -d: -f2)
  last=$(grep -o '"eval_loss":[0-9.]*' "$dir/metrics.jsonl" | tail -1 | cut -d: -f2)
  state=$(grep -o 'optimizer state in the ledger after step 1: .*' "$dir.log" | cut -d: -f2-)
  printf '| %-26s | %-14.4f | %-15.4f | %s |\n' "$name" "$first" "$last" "$state"
done
