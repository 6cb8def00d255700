#!/usr/bin/env bash
# The end-to-end measurements of issue 41 (bench/RESULTS.md, "Instruction fine-tuning"), on the
# committed instruction set (bench/sft/make_instructions.py) and SmolLM2-135M-Instruct's GGUF
# (tools/fetch-smollm2.sh):
#   speed   fitgrad LoRA with --packing none, Hugging Face Trainer + PEFT (hf_sft_baseline.py),
#           fitgrad with --packing bfd, and with --packing none --group_by_length, alternating,
#           ROUNDS rounds of STEPS steps each: the same data, seq_len 256, batch 4, rank 16,
#           2 threads, fp32 (BF16=1: both arms under bf16 autocast, the fp32 weights kept);
#   quality the held-out response loss (--eval_data heldout.jsonl) before (a step at lr 1e-12)
#           and after a LoRA and a QLoRA fine-tune of TRAIN_STEPS steps, with sample answers to
#           eval_prompts.jsonl, and `fitgrad eval` on Moby-Dick before and after (the adapter
#           must not cost the base model its text).
# Usage: bench/sft/sft_runs.sh speed|quality OUT_DIR. Unset OPENBLAS_CORETYPE/L2_SIZE here only.
set -euo pipefail
what=$1 out=$2
mkdir -p "$out"
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
export OMP_NUM_THREADS=2
fg=${FITGRAD:-build/fitgrad}
model=${MODEL:-$HOME/.cache/fitgrad/SmolLM2-135M-Instruct.Q4_1.gguf}
py=${PYTHON:-/work/venv-hf/bin/python}
set_dir=bench/sft/instructions
common=(--model "$model" --data "$set_dir/train.jsonl" --seq_len 256 --per_device_train_batch_size 4
  --lora_r 16 --lora_alpha 16 --logging_steps 1 --progress plain)

if [ "$what" = speed ]; then
  steps=${STEPS:-5} rounds=${ROUNDS:-1} precision=()
  if [ "${BF16:-0}" = 1 ]; then precision=(--bf16); fi
  for r in $(seq "$rounds"); do
    "$fg" train "${common[@]}" "${precision[@]}" --learning_rate 2e-4 --max_steps "$steps" \
      --eval_strategy no --save_strategy no --packing none --output_dir "$out/fg-none-$r" \
      >"$out/fg-none-$r.log" 2>&1
    for padding in max_length longest; do
      "$py" bench/sft/hf_sft_baseline.py --model "$model" --max_steps "$steps" --seq_len 256 \
        --per_device_train_batch_size 4 --lora_r 16 --lora_alpha 16 --learning_rate 2e-4 \
        --threads 2 --padding "$padding" "${precision[@]}" >"$out/hf-$padding-$r.log" 2>&1
    done
    "$fg" train "${common[@]}" "${precision[@]}" --learning_rate 2e-4 --max_steps "$steps" \
      --eval_strategy no --save_strategy no --packing bfd --output_dir "$out/fg-bfd-$r" \
      >"$out/fg-bfd-$r.log" 2>&1
    "$fg" train "${common[@]}" "${precision[@]}" --learning_rate 2e-4 --max_steps "$steps" \
      --eval_strategy no --save_strategy no --packing none --group_by_length \
      --output_dir "$out/fg-grouped-$r" >"$out/fg-grouped-$r.log" 2>&1
  done
  for f in "$out"/*.log; do
    echo "== $f"
    grep -E "packing:|batches cut|RESULT|tok/s" "$f" | tail -4
  done
  exit 0
fi

steps=${TRAIN_STEPS:-40}
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
