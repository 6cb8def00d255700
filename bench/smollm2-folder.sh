# shellcheck shell=bash
# bench/smollm2-folder.sh — sourced by the drivers that compare fitgrad with transformers on
# SmolLM2-135M-Instruct (issue 60): sets smollm2_folder to the Hugging Face folder that
# `fitgrad export` writes, in f32, from the Q4_1 GGUF tools/fetch-smollm2.sh fetches, writing
# it the first time. Both arms read that folder: the same weights and tokenizer (transformers 5
# will not train a model it read from a GGUF file). Needs $fg, the fitgrad binary. MODEL names
# another GGUF, SMOLLM2_FOLDER another folder.

smollm2_gguf="${MODEL:-${FITGRAD_CACHE:-$HOME/.cache/fitgrad}/SmolLM2-135M-Instruct.Q4_1.gguf}"
smollm2_folder="${SMOLLM2_FOLDER:-${smollm2_gguf%.gguf}-f32}"
# shellcheck disable=SC2154 # fg: the sourcing driver sets it
if [[ ! -f $smollm2_folder/config.json ]]; then
  if [[ ! -f $smollm2_gguf ]]; then
    echo "${0##*/}: no $smollm2_gguf: tools/fetch-smollm2.sh fetches it" >&2
    exit 1
  fi
  "$fg" export --base "$smollm2_gguf" -o "$smollm2_folder" --dtype f32 >&2
fi
