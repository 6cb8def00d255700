// `fitgrad quantize IN OUT.safetensors --nf4|--fp4 [--blocksize 64] [--no_double_quant]
// [--dtype bf16] [--overwrite]`: writes a model's safetensors (or Llama GGUF) file with its linear weights in bitsandbytes' 4-bit format
// (io/bnb_4bit.h), the layout transformers saves a `*-bnb-4bit` model in; every other tensor
// (embeddings, norms, the head, biases) is copied as it is. A weight is quantized when it is
// a 2-D "*.weight" that is neither an embedding (embed_tokens, wte, wpe) nor lm_head, as
// transformers' bitsandbytes integration skips those.
//
// Note [Streaming quantization]
// The input is mapped, not read: each weight is converted to f32 alone, quantized, and its
// f32 copy freed before the next, and untouched tensors are written straight from the
// mapping. What the command holds is the quantized output (about 0.52 bytes per weight with
// double quantization) and one weight in f32, far below the model's size; the output file
// appears complete or not at all, and follows Note [Output policy] (apps/output_policy.h).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <ostream>
#include <string>

#include "tensor/ops/quantize.h"

namespace fitgrad::apps {

struct QuantizeArgs {
  std::string in, out;
  bool nf4 = false, fp4 = false;
  int64_t blocksize = 64;
  bool no_double_quant = false;
  std::string dtype = "bf16";      // GGUF input: the dense tensors' dtype (Note [GGUF input])
  bool overwrite = false;          // replace an existing OUT (Note [Output policy])
  bool skip_verification = false;  // Note [Verified reads] in train/checkpoint_dir.h
};

// Whether a tensor named `name` of shape `shape` is a linear weight that gets quantized.
bool is_quantized_linear(const std::string& name, const Shape& shape);

// Runs the command; returns how many weights it quantized. Throws "[quantize] ..." on bad
// input.
int64_t quantize_model_file(const QuantizeArgs& args, std::ostream& out);

// Registers the `quantize` subcommand bound to `args`, and returns it.
CLI::App* add_quantize_command(CLI::App& app, QuantizeArgs& args);

}  // namespace fitgrad::apps
