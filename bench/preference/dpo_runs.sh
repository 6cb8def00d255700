#!/usr/bin/env bash
# The end-to-end measurements of preference tuning (bench/RESULTS.md, "Preference tuning"), on
# the committed pairs (bench/preference/make_pairs.py) and SmolLM2-135M-Instruct's GGUF
# (tools/fetch-smollm2.sh):
#   speed   fitgrad DPO with LoRA (its reference the base with the adapter off; each batch's
#           answers packed into rows, the default), TRL's DPOTrainer + PEFT
#           (trl_dpo_baseline.py, the same reference), fitgrad with --packing none (an answer a
#           row, as TRL) and fitgrad with --group_by_length, alternating, ROUNDS rounds of
#           STEPS steps: the same pairs,
#           seq_len 256, 2 pairs a step, rank 16, beta 0.1, sigmoid loss, 2 threads, fp32
#           (BF16=1: both under bf16 autocast over fp32 weights);
#   quality DPO with LoRA for TRAIN_STEPS steps of 4 pairs, scored on the 100 held-out pairs
#           (--eval_data heldout.jsonl) at the start and every EVAL_EVERY steps: reward accuracy
#           and margin, as TRL logs them.
# Usage: bench/preference/dpo_runs.sh speed|quality OUT_DIR. Unset OPENBLAS_CORETYPE/L2_SIZE
# here only.
set -euo pipefail
what=$1 out=$2
mkdir -p "$out"
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
export OMP_NUM_THREADS=2
fg=${FITGRAD:-build/fitgrad}
model=${MODEL:-$HOME/.cache/fitgrad/SmolLM2-135M-Instruct.Q4_1.gguf}
py=${PYTHON:-/work/venv-hf/bin/python}
pairs=bench/preference/pairs
common=(--model "$model" --data "$pairs/train.jsonl" --objective dpo --beta 0.1
  --loss_type sigmoid --seq_len 256 --lora_r 16 --lora_alpha 16 --logging_steps 1
  --progress plain)

if [ "$what" = speed ]; then
  steps=${STEPS:-8} rounds=${ROUNDS:-1} precision=()
  if [ "${BF16:-0}" = 1 ]; then precision=(--bf16); fi
  for r in $(seq "$rounds"); do
    "$fg" train "${common[@]}" "${precision[@]}" --per_device_train_batch_size 2 \
      --learning_rate 5e-5 --max_steps "$steps" --eval_strategy no --save_strategy no \
      --output_dir "$out/fg-$r" >"$out/fg-$r.log" 2>&1
    "$py" bench/preference/trl_dpo_baseline.py --max_steps "$steps" --seq_len 256 \
      --per_device_train_batch_size 2 --lora_r 16 --lora_alpha 16 --learning_rate 5e-5 \
      --threads 2 "${precision[@]}" >"$out/trl-$r.log" 2>&1
    "$fg" train "${common[@]}" "${precision[@]}" --per_device_train_batch_size 2 \
      --learning_rate 5e-5 --max_steps "$steps" --eval_strategy no --save_strategy no \
      --packing none --output_dir "$out/fg-rows-$r" >"$out/fg-rows-$r.log" 2>&1
    "$fg" train "${common[@]}" "${precision[@]}" --per_device_train_batch_size 2 \
      --learning_rate 5e-5 --max_steps "$steps" --eval_strategy no --save_strategy no \
      --group_by_length --output_dir "$out/fg-grouped-$r" >"$out/fg-grouped-$r.log" 2>&1
  done
  for f in "$out"/*.log; do
    echo "== $f"
    grep -E "packing:|^batches |RESULT|^done" "$f" | tail -3
  done
  exit 0
fi

steps=${TRAIN_STEPS:-60} every=${EVAL_EVERY:-20}
"$fg" train "${common[@]}" --per_device_train_batch_size 4 --learning_rate 2e-4 \
  --max_steps "$steps" --eval_data "$pairs/heldout.jsonl" --eval_steps "$every" \
  --eval_max_batches 0 --per_device_eval_batch_size 4 --save_strategy no \
  --output_dir "$out/dpo" >"$out/dpo.log" 2>&1
"$fg" train "${common[@]}" --per_device_train_batch_size 4 --learning_rate 1e-12 \
  --max_steps 1 --eval_data "$pairs/heldout.jsonl" --eval_steps 1 --eval_max_batches 0 \
  --per_device_eval_batch_size 4 --save_strategy no --output_dir "$out/before" \
  >"$out/before.log" 2>&1
for d in before dpo; do
  echo "== $d"
  grep -E '"eval_loss"' "$out/$d/metrics.jsonl" | python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    print(r["step"], round(r["eval_loss"], 4), round(r["eval_rewards/accuracies"], 3),
          round(r["eval_rewards/margins"], 4))'
done
