#!/usr/bin/env bash
# Decode tokens/s of SmolLM2-135M (its Q4_1 GGUF, tools/fetch-smollm2.sh) on one thread,
# f32 weights against the NF4 base of `fitgrad generate --quantize nf4` (issue 13), in the
# same run: the arms alternate, ROUNDS times each, greedy 64 tokens from the same prompt,
# and the table gives each run's decode rate, the median per arm and its ratio to f32.
# Usage: bench/nf4_decode.sh [BUILD_DIR] [ROUNDS]   (about 10 s per run)
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
model=${FITGRAD_SMOLLM2:-${FITGRAD_CACHE:-$HOME/.cache/fitgrad}/SmolLM2-135M-Instruct.Q4_1.gguf}
[[ -f $model ]] || { echo "nf4_decode: no model at $model (tools/fetch-smollm2.sh)" >&2; exit 1; }
arms=("f32|" "nf4|--quantize nf4" "nf4 double quant|--quantize nf4 --bnb_4bit_use_double_quant")
declare -A rates peaks
for ((r = 1; r <= rounds; ++r)); do
  for arm in "${arms[@]}"; do
    name=${arm%%|*}
    read -r -a flags <<< "${arm#*|}"
    line=$(OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$build/fitgrad" generate --model "$model" \
      --prompt "Once upon a time" --temperature 0 --max_new_tokens 64 "${flags[@]}" 2>&1 >/dev/null |
      grep '^\[generate\]')
    rates[$name]+="$(sed -E 's/.*decode: ([0-9.]+) tokens.*/\1/' <<< "$line") "
    peaks[$name]=$(sed -E 's/.*peak memory: (.*)$/\1/' <<< "$line")
  done
done
median() { tr ' ' '\n' <<< "$1" | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
base=$(median "${rates[f32]}")
echo "| weights | decode tokens/s (runs) | median | vs f32 | peak allocated |"
echo "|---|---|---|---|---|"
for arm in "${arms[@]}"; do
  name=${arm%%|*}
  m=$(median "${rates[$name]}")
  printf '| %s | %s | %s | %.2fx | %s |\n' "$name" "${rates[$name]% }" "$m" \
    "$(awk -v a="$m" -v b="$base" 'BEGIN {print a / b}')" "${peaks[$name]}"
done
