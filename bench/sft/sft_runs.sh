#!/usr/bin/env bash
# The end-to-end measurements of instruction fine-tuning (issues 41 and 60; bench/RESULTS.md,
# "Instruction fine-tuning"), on the committed instruction set (bench/sft/make_instructions.py)
# and SmolLM2-135M-Instruct (tools/fetch-smollm2.sh):
#   speed   fitgrad LoRA against TRL's SFTTrainer + PEFT (hf_sft_baseline.py, in the reference
#           environment: bench/reference-env.sh), arms alternating, ROUNDS rounds (default 2)
#           of STEPS steps (default 5, at least 2) for each mode of MODES (default "packed
#           padded"): packed, fitgrad --packing bfd against TRL's packing_strategy bfd; padded,
#           fitgrad --packing none against TRL with one example a row, each batch padded to
#           its longest, as both do by default (TRL_PADDING=max_length: TRL's rows padded to
#           --seq_len). Both arms read the folder `fitgrad export` writes
#           (bench/smollm2-folder.sh); the same data, seq_len 256, batch 4, rank 16 on the
#           seven projections, THREADS threads (default 2), fp32
#           (BF16=1: both under bf16 autocast, the fp32 weights kept). Prints each round's
#           example tokens per second of both arms and the ratio (bench/arm_summary.py).
#   quality the held-out response loss (--eval_data heldout.jsonl) before (a step at lr 1e-12)
#           and after a LoRA and a QLoRA fine-tune of TRAIN_STEPS steps, with sample answers to
#           eval_prompts.jsonl, and `fitgrad eval` on Moby-Dick before and after (the adapter
#           must not cost the base model its text); fitgrad alone, on the GGUF (MODEL).
# Usage: bench/sft/sft_runs.sh speed|quality OUT_DIR. Unset OPENBLAS_CORETYPE/L2_SIZE here only.
set -euo pipefail
what=$1 out=$2
mkdir -p "$out"
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
threads=${THREADS:-2}
export OMP_NUM_THREADS=$threads
fg=${FITGRAD:-build/fitgrad}
model=${MODEL:-$HOME/.cache/fitgrad/SmolLM2-135M-Instruct.Q4_1.gguf}
set_dir=bench/sft/instructions
common=(--data "$set_dir/train.jsonl" --seq_len 256 --per_device_train_batch_size 4
  --lora_r 16 --lora_alpha 16 --logging_steps 1 --progress plain)

if [ "$what" = speed ]; then
  # shellcheck source=bench/reference-python.sh
  source "$root/bench/reference-python.sh"
  # shellcheck source=bench/smollm2-folder.sh
  source "$root/bench/smollm2-folder.sh"
  steps=${STEPS:-5} rounds=${ROUNDS:-2} precision=()
  if [ "${BF16:-0}" = 1 ]; then precision=(--bf16); fi
  for r in $(seq "$rounds"); do
    for mode in ${MODES:-packed padded}; do
      case $mode in
        packed) fg_packing=bfd trl_rows=(--packing bfd) ;;
        padded) fg_packing=none trl_rows=(--packing none --padding "${TRL_PADDING:-longest}") ;;
        *) echo "sft_runs.sh: MODES holds packed and padded, not $mode" >&2 && exit 1 ;;
      esac
      cmd=("$fg" train --model "$smollm2_folder" "${common[@]}" "${precision[@]}"
        --learning_rate 2e-4 --max_steps "$steps" --eval_strategy no --save_strategy no
        --packing "$fg_packing" --output_dir "$out/fg-$mode-$r")
      { echo "command: ${cmd[*]}" && "${cmd[@]}"; } 2>&1 | stamp_lines >"$out/fg-$mode-$r.log"
      "$ref_python" bench/sft/hf_sft_baseline.py --model "$smollm2_folder" --max_steps "$steps" \
        --seq_len 256 --per_device_train_batch_size 4 --lora_r 16 --lora_alpha 16 \
        --learning_rate 2e-4 --threads "$threads" "${trl_rows[@]}" "${precision[@]}" \
        --output_dir "$out/trl-$mode-$r" >"$out/trl-$mode-$r.log" 2>&1
      echo "round $r, $mode: $(grep -o 'done: .*' "$out/fg-$mode-$r.log" | head -1); TRL" \
        "$(grep -o 'example_tokens_per_second_steady=[^ ]*' "$out/trl-$mode-$r.log")"
    done
  done
  "$ref_python" bench/arm_summary.py sft "$out"
  exit 0
fi

steps=${TRAIN_STEPS:-40}
common=(--model "$model" "${common[@]}")
quality=(--eval_data "$set_dir/heldout.jsonl" --eval_prompts "$set_dir/eval_prompts.jsonl"
  --eval_max_new_tokens 32 --eval_max_batches 0 --per_device_eval_batch_size 4)
"$fg" train "${common[@]}" "${quality[@]}" --learning_rate 1e-12 --max_steps 1 --eval_steps 1 \
  --save_strategy no --output_dir "$out/before" >"$out/before.log" 2>&1
"$fg" train "${common[@]}" "${quality[@]}" --max_steps "$steps" --eval_steps "$steps" \
  --save_strategy steps --save_steps "$steps" --learning_rate 2e-4 --output_dir "$out/lora" \
  >"$out/lora.log" 2>&1
"$fg" train "${common[@]}" "${quality[@]}" --quantize nf4 --max_steps "$steps" \
  --eval_steps "$steps" --learning_rate 2e-4 --save_strategy no --output_dir "$out/qlora" \
  >"$out/qlora.log" 2>&1
"$fg" eval --model "$model" --data data/assets/mobydick.txt --seq_len 256 --max_windows 20 \
  >"$out/eval-before.log" 2>&1
"$fg" eval --model "$model" --adapter "$out/lora/checkpoint-$steps" \
  --data data/assets/mobydick.txt --seq_len 256 --max_windows 20 >"$out/eval-after.log" 2>&1
for f in "$out"/*.log; do
  echo "== $f"
  grep -E "validation loss|perplexity|packing:|peak" "$f" | tail -3
done
