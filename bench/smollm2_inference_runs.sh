#!/usr/bin/env bash
# SmolLM2-135M-Instruct inference, fitgrad against transformers (issues 45 and 60): arms
# alternating, ROUNDS rounds (default 3), then each round's rate of both arms and the ratio
# (bench/arm_summary.py). Both arms read the folder `fitgrad export` writes
# (bench/smollm2-folder.sh); the transformers arm runs in the reference environment
# (bench/reference-env.sh, $REFERENCE_ENV). THREADS threads (default 2), DTYPE (default bf16).
#   generate  greedy decoding of bench/smollm2_generate_hf.py's default prompt, MAX_NEW_TOKENS
#             new tokens (default 128): `fitgrad generate --temperature 0` against
#             smollm2_generate_hf.py; decode tokens per second.
#   eval      WINDOWS windows (default 16) of 512 tokens of the held-out slice of Austen
#             (smollm2_perplexity_hf.heldout_slice, written to OUT_DIR/austen_heldout.txt), one
#             window a forward: `fitgrad eval` against smollm2_perplexity_hf.py; scored tokens
#             per second, the windows only.
# Usage: bench/smollm2_inference_runs.sh generate|eval OUT_DIR. Unset OPENBLAS_CORETYPE and
# OPENBLAS_L2_SIZE here only.
set -euo pipefail
what=$1 out=$2
mkdir -p "$out"
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
threads=${THREADS:-2} dtype=${DTYPE:-bf16} rounds=${ROUNDS:-3}
export OMP_NUM_THREADS=$threads
fg=${FITGRAD:-build/fitgrad}
# shellcheck source=bench/reference-python.sh
source "$root/bench/reference-python.sh"
# shellcheck source=bench/smollm2-folder.sh
source "$root/bench/smollm2-folder.sh"

case $what in
  generate)
    prompt="It is a truth universally acknowledged, that a single man in possession of a good"
    prompt+=" fortune"
    new=${MAX_NEW_TOKENS:-128}
    fg_cmd=("$fg" generate --model "$smollm2_folder" --prompt "$prompt" --temperature 0
      --max_new_tokens "$new" --dtype "$dtype")
    hf_cmd=("$ref_python" "$root/bench/smollm2_generate_hf.py" --model "$smollm2_folder"
      --prompt "$prompt" --max_new_tokens "$new" --dtype "$dtype" --threads "$threads")
    ;;
  eval)
    windows=${WINDOWS:-16}
    "$ref_python" -c 'import sys; sys.path.insert(0, sys.argv[1]); import smollm2_perplexity_hf as m
open(sys.argv[3], "wb").write(m.heldout_slice(sys.argv[2]))' \
      "$root/bench" "$root/data/assets/austen.txt" "$out/austen_heldout.txt"
    fg_cmd=("$fg" eval --model "$smollm2_folder" --data "$out/austen_heldout.txt" --seq_len 512
      --max_windows "$windows" --dtype "$dtype")
    hf_cmd=("$ref_python" "$root/bench/smollm2_perplexity_hf.py" "$windows" "$smollm2_folder"
      "$root/data/assets/austen.txt" "$dtype" "$threads")
    ;;
  *) echo "smollm2_inference_runs.sh: generate or eval, not $what" >&2 && exit 1 ;;
esac

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
  { echo "command: ${fg_cmd[*]}" && "${fg_cmd[@]}"; } >"$out/fg-$what-$r.log" 2>&1
  { echo "command: ${hf_cmd[*]}" && "${hf_cmd[@]}"; } >"$out/hf-$what-$r.log" 2>&1
  echo "round $r: fitgrad" \
    "$(grep -Eo '(decode: [0-9.]+|[0-9.]+) tokens/s' "$out/fg-$what-$r.log" | tail -1);" \
    "transformers $(grep -Eo '(decode_tokens_per_s|tokens_per_s)=[^ ]*' "$out/hf-$what-$r.log")"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$ref_python" "$root/bench/arm_summary.py" "$what" "$out"
