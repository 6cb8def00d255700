// The model of an inference command (generate, eval): its options, described here once, and
// the load they ask for: a model spec (Note [Model specs] in model_source.h) with optional
// weights, on a device, in f32 or bf16, optionally held in 4 bits and with a PEFT LoRA
// adapter over it (Note [Generating from a 4-bit base]).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "tensor/dtype.h"
#include "train/model_source.h"

namespace fitgrad::apps {

// Note [Generating from a 4-bit base]
// quantize "nf4": every Linear and the token embedding are held in 4 bits (quant_type nf4 or
// fp4, double_quant as bitsandbytes' bnb_4bit_use_double_quant), quantized as the weights load
// (Note [Streaming loads]), and a decoding step reads the codes directly (Note [Decoding reads
// the nibbles]). adapter: a PEFT LoRA adapter directory (adapter_config.json +
// adapter_model.safetensors) put over the base, quantized or not, unmerged, as PEFT runs it.
struct InferenceModelOptions {
  std::string model;  // a spec (Note [Model specs] in model_source.h)
  std::string init;   // optional weights file
  std::string device = "cpu";
  std::string dtype = "f32";  // f32 or bf16
  std::string quantize;
  std::string quant_type = "nf4";
  bool double_quant = false;
  std::string adapter;
  uint64_t seed = 0;               // of a random init
  bool skip_verification = false;  // Note [Verified reads] in train/checkpoint_dir.h
};

// Registers --model (required), --init, --device, --dtype, --quantize, --bnb_4bit_quant_type,
// --bnb_4bit_use_double_quant and --adapter on `cmd`.
void add_inference_model_options(CLI::App& cmd, InferenceModelOptions& o);

// The dtype an inference command computes in: "f32" or "bf16"; anything else throws
// "[command] --dtype must be f32 or bf16, got '...'".
DType inference_dtype(const char* command, const std::string& name);

// Loads the model the options describe; errors start "[command]" or the loader's prefix.
train::LoadedModel load_inference_model(const char* command, const InferenceModelOptions& o);

}  // namespace fitgrad::apps
