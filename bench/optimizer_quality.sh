#!/usr/bin/env bash
# The quality table of issue 28: what each memory trick costs in training quality.
#
# A 14.3M-parameter byte-level Llama (bench/quality_model.json) is pretrained once on Austen
# (data/assets/austen.txt; 200 steps of 8 x 128 tokens, seed 0), then continued-pretrained
# on Moby Dick, a corpus it was not initialised on, once per row and seed: the same data
# order (the seed's), the same step budget, the same cosine schedule, and the validation
# loss on the held-out end of Moby Dick (16 batches of 8 x 128 tokens) at half the budget
# and at its end. Each row prints its gap to the fp32 AdamW row of the same seed, the
# optimizer state in the ledger after step 1, the run's peak of allocated memory, and the
# median seconds per step of its logging intervals (this machine, wall clock, noisy).
#
# Usage: bench/optimizer_quality.sh [BUILD_DIR] [ROW_REGEX]
#   STEPS=80 SEEDS="1 2" WORK=/tmp/fitgrad-quality CORPUS=data/assets/mobydick.txt in the
#   environment (data/assets/MOBYDICK.md).
# The base and every finished run are kept in $WORK: a later invocation reuses a run whose
# flags are unchanged, so delete $WORK when fitgrad itself changed. A row matching ROW_REGEX is
# printed with the reference row of each seed (its gap needs it).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
only=${2:-.}
steps=${STEPS:-80}
seeds=${SEEDS:-1 2}
work=${WORK:-/tmp/fitgrad-quality}
corpus=${CORPUS:-data/assets/mobydick.txt}
model=bench/quality_model.json
[[ -f $corpus ]] || { echo "no Moby Dick at $corpus: set CORPUS" >&2; exit 1; }
mkdir -p "$work"
cp -n "$corpus" "$work/mobydick.txt"

base=$work/base/checkpoint-200/model.safetensors
if [[ ! -f $base ]]; then
  rm -rf "$work/base"
  "$build/fitgrad" train --model "$model" --data data/assets/austen.txt --seq_len 128 \
    --per_device_train_batch_size 8 --max_steps 200 --learning_rate 2e-3 \
    --lr_scheduler_type cosine --warmup_steps 20 --weight_decay 0.1 --logging_steps 50 \
    --eval_steps 200 --eval_max_batches 16 --per_device_eval_batch_size 8 --seed 0 \
    --progress plain --output_dir "$work/base" >"$work/base.log" 2>&1 ||
    { echo "the base run failed:"; tail -5 "$work/base.log"; exit 1; }
  echo "base: $(grep -o 'step 200: validation loss [0-9.]*' "$work/base.log") on Austen"
fi

common=(--model "$model" --init "$base" --data "$work/mobydick.txt" --seq_len 128
        --per_device_train_batch_size 4 --max_steps "$steps" --logging_steps 10
        --eval_steps $((steps / 2)) --eval_max_batches 16 --per_device_eval_batch_size 8
        --lr_scheduler_type cosine --warmup_steps 8 --save_strategy no --progress plain)
adam=(--optim adamw_torch --learning_rate 1e-3 --weight_decay 0.01)
lora=(--learning_rate 2e-3 --lora_r 16 --lora_alpha 32 --lora_target all-linear)
rows=(
  "adamw fp32 (reference)|${adam[*]}"
  "adamw bf16 autocast|${adam[*]} --bf16"
  "adamw pure bf16 + SR|${adam[*]} --pure_bf16 --stochastic_rounding"
  "adamw pure bf16|${adam[*]} --pure_bf16"
  "adamw_8bit|--optim adamw_8bit --learning_rate 1e-3 --weight_decay 0.01"
  "adafactor (torch)|--optim adafactor --learning_rate 1e-2"
  "adafactor_hf (relative step)|--optim adafactor_hf"
  "apollo r96|--optim apollo --learning_rate 1e-3 --optim_args rank=96,update_proj_gap=40"
  "apollo_mini|--optim apollo_mini --learning_rate 1e-3 --optim_args update_proj_gap=40"
  "galore_adamw r96|--optim galore_adamw --learning_rate 1e-3 --optim_target_modules attn,mlp --optim_args rank=96,update_proj_gap=40,scale=0.25"
  "int8 weights + adamw|${adam[*]} --bf16 --weights_int8"
  "int8 + apollo r96, pure bf16|--optim apollo --learning_rate 1e-3 --optim_args rank=96,update_proj_gap=40 --weights_int8 --pure_bf16 --stochastic_rounding --optim_in_backward --max_grad_norm 0"
  "int8 + apollo_mini (every 2-D weight), pure bf16|--optim apollo_mini --learning_rate 1e-3 --optim_args update_proj_gap=40 --optim_target_modules attn,mlp,embed_tokens --weights_int8 --pure_bf16 --stochastic_rounding --optim_in_backward --max_grad_norm 0"
  "sgd momentum 0.9|--optim sgd --learning_rate 0.1 --optim_args momentum=0.9"
  "lora r16|${lora[*]}"
  "qlora r16 (nf4)|${lora[*]} --quantize nf4"
)

eval_at() { grep -o "\"eval_loss\":[0-9.]*[^}]*\"step\":$2}" "$1" | cut -d: -f2 | cut -d, -f1; }
seconds_per_step() {  # median over the logging intervals after the first
  grep '"tokens_per_second"' "$1" | sed 's/.*"tokens_per_second":\([0-9.e+-]*\).*/\1/' |
    tail -n +2 | awk -v t=512 '{ print t / $1 }' | sort -g |
    awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

printf '| %-48s | seed | eval @%-4s | eval @%-4s | gap to fp32 AdamW | optimizer state | peak allocated | s/step |\n' \
  "row" $((steps / 2)) "$steps"
printf '|---|---|---|---|---|---|---|---|\n'
declare -A reference
for seed in $seeds; do
  for row in "${rows[@]}"; do
    name=${row%%|*}
    [[ $name == "adamw fp32 (reference)" || $name =~ $only ]] || continue
    read -r -a flags <<<"${row#*|}"
    dir="$work/runs/seed$seed/${name//[^a-zA-Z0-9]/_}"
    key="${common[*]} ${flags[*]} --seed $seed"
    if [[ ! -f $dir.key || $(<"$dir.key") != "$key" || ! -f $dir/metrics.jsonl ]]; then
      rm -rf "$dir" "$dir.key"
      mkdir -p "$(dirname "$dir")"
      if ! "$build/fitgrad" train "${common[@]}" "${flags[@]}" --seed "$seed" \
        --output_dir "$dir" >"$dir.log" 2>&1; then
        printf '| %-48s | %s | failed: %s |\n' "$name" "$seed" "$(tail -1 "$dir.log")"
        continue
      fi
      echo "$key" >"$dir.key"
    fi
    half=$(eval_at "$dir/metrics.jsonl" $((steps / 2)))
    end=$(eval_at "$dir/metrics.jsonl" "$steps")
    [[ $name == "adamw fp32 (reference)" ]] && reference[$seed]=$end
    gap=$(awk -v a="$end" -v b="${reference[$seed]}" 'BEGIN { printf "%+.4f", a - b }')
    state=$(grep -o 'optimizer state in the ledger after step 1: [^=]*' "$dir.log" | cut -d: -f2)
    peak=$(grep -o 'peak memory [0-9.]* [KMG]iB' "$dir.log" | cut -d' ' -f3-)
    printf '| %-48s | %s | %.4f | %.4f | %s | %s | %s | %.2f |\n' "$name" "$seed" "$half" "$end" \
      "$gap" "${state# }" "$peak" "$(seconds_per_step "$dir/metrics.jsonl")"
  done
done
