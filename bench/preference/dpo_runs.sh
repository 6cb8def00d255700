#!/usr/bin/env bash
# The end-to-end measurements of preference tuning (bench/RESULTS.md, "Preference tuning"), on
# the committed pairs (bench/preference/make_pairs.py) and SmolLM2-135M-Instruct
# (tools/fetch-smollm2.sh):
#   speed   fitgrad DPO with LoRA (its reference the base with the adapter off; each batch's
#           answers packed into rows, the default) against TRL's DPOTrainer + PEFT
#           (trl_dpo_baseline.py, the same reference, in the reference environment:
#           bench/reference-env.sh), arms alternating, ROUNDS rounds (default 2) of STEPS steps
#           (default 8, at least 2): both arms read the folder `fitgrad export` writes
#           (bench/smollm2-folder.sh); the same pairs, seq_len 256, 2 pairs a step, rank 16 on
#           the seven projections, beta 0.1, sigmoid loss, THREADS threads (default 2), fp32
#           (BF16=1: both under bf16 autocast over fp32 weights). Prints each round's pairs per
#           second of both arms and the ratio (bench/arm_summary.py);
#   quality DPO with LoRA for TRAIN_STEPS steps of 4 pairs, scored on the 100 held-out pairs
#           (--eval_data heldout.jsonl) at the start and every EVAL_EVERY steps: reward accuracy
#           and margin, as TRL logs them; fitgrad alone, on the GGUF (MODEL).
# Usage: bench/preference/dpo_runs.sh speed|quality OUT_DIR. Unset OPENBLAS_CORETYPE/L2_SIZE
# here only.
set -euo pipefail
what=$1 out=$2
mkdir -p "$out"
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
threads=${THREADS:-2}
export OMP_NUM_THREADS=$threads
fg=${FITGRAD:-build/fitgrad}
model=${MODEL:-$HOME/.cache/fitgrad/SmolLM2-135M-Instruct.Q4_1.gguf}
pairs=bench/preference/pairs
common=(--data "$pairs/train.jsonl" --objective dpo --beta 0.1 --loss_type sigmoid
  --seq_len 256 --lora_r 16 --lora_alpha 16 --logging_steps 1 --progress plain)

if [ "$what" = speed ]; then
  # shellcheck source=bench/reference-python.sh
  source "$root/bench/reference-python.sh"
  # shellcheck source=bench/smollm2-folder.sh
  source "$root/bench/smollm2-folder.sh"
  steps=${STEPS:-8} rounds=${ROUNDS:-2} precision=()
  if [ "${BF16:-0}" = 1 ]; then precision=(--bf16); fi
  for r in $(seq "$rounds"); do
    cmd=("$fg" train --model "$smollm2_folder" "${common[@]}" "${precision[@]}"
      --per_device_train_batch_size 2 --learning_rate 5e-5 --max_steps "$steps"
      --eval_strategy no --save_strategy no --output_dir "$out/fg-dpo-$r")
    { echo "command: ${cmd[*]}" && "${cmd[@]}"; } 2>&1 | stamp_lines >"$out/fg-dpo-$r.log"
    "$ref_python" bench/preference/trl_dpo_baseline.py --model "$smollm2_folder" \
      --max_steps "$steps" --seq_len 256 --per_device_train_batch_size 2 --lora_r 16 \
      --lora_alpha 16 --learning_rate 5e-5 --threads "$threads" "${precision[@]}" \
      --output_dir "$out/trl-dpo-$r" >"$out/trl-dpo-$r.log" 2>&1
    echo "round $r: $(grep -o 'done: .*' "$out/fg-dpo-$r.log" | head -1); TRL" \
      "$(grep -o 'pairs_per_second_steady=[^ ]*' "$out/trl-dpo-$r.log")"
  done
  "$ref_python" bench/arm_summary.py dpo "$out"
  exit 0
fi

steps=${TRAIN_STEPS:-60} every=${EVAL_EVERY:-20}
common=(--model "$model" "${common[@]}")
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
