#!/usr/bin/env bash
# The questions of issue 14 answered by `fitgrad memplan`, for bench/RESULTS.md:
#   1. how fast a plan is (wall time and resident memory of llama2-7b and llama2-70b QLoRA);
#   2. which 7B/8B, 13B and 30B setups fit in 24 GiB, at what longest sequence and batch;
#   3. the longest context of Llama-3.1-8B QLoRA (r 32, all linear layers, batch 1) on a
#      24 GB card;
#   4. the smallest full-parameter plan of llama2-7b (pure bf16, Adafactor,
#      optimizer-in-backward) and its longest sequence;
#   5. issue 27's long contexts: with the fused head, the tiled MLP and offloaded
#      checkpoints, the longest sequence of Llama-3.1-8B QLoRA r 32 on 24 GiB and 80 GB, of
#      Llama-2-7B QLoRA on 24 GiB, and of full-parameter Llama-2-7B on 80 GB;
#   6. issue 28's full-parameter plans with an Adam-quality optimizer: Llama-3.1-8B at seq 2048
#      under 16 GiB and Llama-2-7B under 12 GiB (int8 weights, APOLLO or APOLLO-Mini, pure
#      bf16 with stochastic rounding, optimizer-in-backward, checkpointing).
# Longer contexts than a preset's are planned from config.json files written here with the
# same shapes and a larger max_position_embeddings (a rope model's memory does not depend on
# it; Llama-3.1's rope_scaling changes values, not shapes).
# Usage: bench/memplan_questions.sh [build-dir]
set -euo pipefail
BUILD=${1:-build}
FG="$BUILD/fitgrad"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

llama_config() {  # name vocab hidden inter layers heads kv context theta
  cat >"$WORK/$1.json" <<JSON
{"model_type": "llama", "vocab_size": $2, "hidden_size": $3, "intermediate_size": $4,
 "num_hidden_layers": $5, "num_attention_heads": $6, "num_key_value_heads": $7,
 "max_position_embeddings": $8, "rms_norm_eps": 1e-05, "rope_theta": $9,
 "tie_word_embeddings": false}
JSON
  echo "$WORK/$1.json"
}
LLAMA31_8B=$(llama_config llama31-8b 128256 4096 14336 32 32 8 131072 500000)
LLAMA31_8B_LONG=$(llama_config llama31-8b-long 128256 4096 14336 32 32 8 1048576 500000)
LLAMA2_7B_LONGER=$(llama_config llama2-7b-longer 32000 4096 11008 32 32 32 1048576 10000)
LLAMA2_7B=$(llama_config llama2-7b-long 32000 4096 11008 32 32 32 131072 10000)
LLAMA2_13B=$(llama_config llama2-13b-long 32000 5120 13824 40 40 40 131072 10000)
LLAMA_30B=$(llama_config llama-30b-long 32000 6656 17920 60 52 52 131072 10000)

qlora="--quantize nf4 --lora_r 16 --lora_target all-linear --bf16 --gradient_checkpointing"
lora_bf16="--pure_bf16 --lora_r 16 --lora_target all-linear --gradient_checkpointing"
full="--pure_bf16 --stochastic_rounding --optim adafactor --optim_in_backward --max_grad_norm 0 --gradient_checkpointing"

echo "== 1. plan speed"
for spec in "llama2-7b rtx4090" "llama2-70b h100"; do
  set -- $spec
  /usr/bin/time -f "$1 QLoRA on $2: %e s wall, %M KiB max resident" \
    "$FG" memplan --model "$1" $qlora --seq_len 2048 --per_device_train_batch_size 1 \
    --device_memory "$2" | grep -E "peak (allocated|reserved)|verdict"
done

echo "== 2. 24 GiB: fits at seq 2048 batch 1? longest seq at batch 1, largest batch at seq 2048"
for model in "llama2-7b $LLAMA2_7B" "llama3-8b $LLAMA31_8B" "llama2-13b $LLAMA2_13B" \
             "llama-30b $LLAMA_30B"; do
  set -- $model
  for setup in qlora lora_bf16 full; do
    flags=${!setup}
    single=$("$FG" memplan --model "$1" $flags --seq_len 2048 --per_device_train_batch_size 1 \
             --device_memory 24GiB 2>/dev/null || true)
    peak=$(echo "$single" | grep -m1 "peak reserved" | sed 's/.*: *//')
    verdict=$(echo "$single" | grep -m1 "^verdict" | cut -c1-40)
    seq=$("$FG" memplan --model "$2" $flags --seq_len 2048 --per_device_train_batch_size 1 \
          --device_memory 24GiB --max_seq_len 2>/dev/null | grep -m1 "that fits is" || true)
    batch=$("$FG" memplan --model "$1" $flags --seq_len 2048 --device_memory 24GiB \
            --max_batch_size --batch_limit 256 2>/dev/null | grep -m1 "that fits is" || true)
    echo "$1 $setup | seq 2048 x 1: $peak reserved, $verdict | ${seq:-none fits} | ${batch:-none fits}"
  done
done

echo "== 2b. QLoRA at seq 512 and 1024, batch 1 (LLaMA-Factory's and Unsloth's figures)"
for model in llama2-7b llama3-8b llama2-13b llama-30b; do
  for seq in 512 1024; do
    echo "$model seq $seq: $("$FG" memplan --model "$model" $qlora --seq_len $seq \
      --per_device_train_batch_size 1 --device_memory 24GiB 2>/dev/null | grep -m1 "peak reserved")"
  done
done

echo "== 3. Llama-3.1-8B QLoRA r 32, all linear, batch 1, on an rtx4090"
"$FG" memplan --model "$LLAMA31_8B" --quantize nf4 --lora_r 32 --lora_target all-linear --bf16 \
  --gradient_checkpointing --per_device_train_batch_size 1 --seq_len 4096 \
  --device_memory rtx4090 --max_seq_len 2>/dev/null | grep -E "that fits is|peak|activation|quantized|temporary|parameter|optimizer"

echo "== 4. llama2-7b full finetuning in 24 GiB: pure bf16, Adafactor, optimizer-in-backward"
for seq in 512 2048; do
  "$FG" memplan --model llama2-7b $full --seq_len $seq --per_device_train_batch_size 1 \
    --device_memory 24GiB | grep -E "^plan|peak (allocated|reserved)|verdict"
done
"$FG" memplan --model llama2-7b ${full/adafactor/sgd} --seq_len 512 --per_device_train_batch_size 1 \
  --device_memory 24GiB | grep -E "^plan|peak (allocated|reserved)"
"$FG" memplan --model "$LLAMA2_7B" $full --seq_len 2048 --per_device_train_batch_size 1 \
  --device_memory 24GiB --max_seq_len 2>/dev/null | grep -E "that fits is"

# plan_each "COMMON FLAGS" "GREP PATTERN" "MODEL|FLAGS|CARD"...: one memplan per spec; a
# plan that does not fit (memplan's exit code 3) is an answer, any other failure stops.
plan_each() {
  local common=$1 pattern=$2 spec model flags card
  shift 2
  for spec in "$@"; do
    IFS='|' read -r model flags card <<<"$spec"
    echo "$(basename "$model" .json) $flags on $card:"
    local rc=0
    "$FG" memplan --model "$model" $flags $common --device_memory "$card" >"$WORK/plan.txt" \
      2>/dev/null || rc=$?
    ((rc == 0 || rc == 3)) || { echo "memplan failed ($rc)"; exit 1; }
    grep -E "$pattern" "$WORK/plan.txt"
  done
}

echo "== 5. long context: fused head, tiled MLP, offloaded checkpoints (issue 27)"
long="--gradient_checkpointing --fused_head_loss --tiled_mlp --offload_activations"
long="$long --per_device_train_batch_size 1 --seq_len 4096 --max_seq_len"
q32="--quantize nf4 --lora_r 32 --lora_target all-linear"
plan_each "$long" "that fits is|peak allocated|peak reserved|host" \
  "$LLAMA31_8B_LONG|$q32 --pure_bf16|rtx4090" "$LLAMA31_8B_LONG|$q32 --bf16|rtx4090" \
  "$LLAMA31_8B_LONG|$q32 --pure_bf16|h100" "$LLAMA2_7B_LONGER|$q32 --pure_bf16|rtx4090" \
  "$LLAMA2_7B_LONGER|${full/--gradient_checkpointing/}|h100"

echo "== 6. full fine-tuning with an Adam-quality optimizer (issue 28): int8 weights + APOLLO"
adam_q="--pure_bf16 --stochastic_rounding --optim_in_backward --max_grad_norm 0"
adam_q="$adam_q --gradient_checkpointing --per_device_train_batch_size 1 --seq_len 2048"
every_2d="--optim_target_modules attn,mlp,embed_tokens,lm_head"
plan_each "$adam_q" "peak allocated|peak reserved|verdict|^ +[0-9.]+ [KMG]iB +[0-9.]+% +[a-z_]+$" \
  "$LLAMA31_8B|--optim apollo|16GiB" "$LLAMA31_8B|--optim apollo --weights_int8|16GiB" \
  "$LLAMA31_8B|--optim apollo_mini --weights_int8 $every_2d|16GiB" \
  "$LLAMA31_8B|--optim apollo --weights_int8 $every_2d|16GiB" \
  "$LLAMA2_7B|--optim apollo --weights_int8|12GiB" \
  "$LLAMA2_7B|--optim apollo --weights_int8 --optim_args rank=128|12GiB" \
  "$LLAMA2_7B|--optim apollo_mini --weights_int8|12GiB"
