// The parts of `fitgrad export` that its writers share (export.cpp's safetensors file and model
// folder, export_gguf.cpp's GGUF file): the base's weights with an adapter merged in, and the
// inputs the output policy must never overwrite.
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "apps/export.h"
#include "apps/output_policy.h"
#include "nn/tensor_source.h"
#include "tensor/tensor.h"

namespace fitgrad::apps {

struct Exported {
  std::vector<std::pair<std::string, Tensor>> tensors;  // Hugging Face names
  int64_t merged = 0;
  std::string what;  // "merged 7 LoRA weights (...) into BASE" or "converted BASE"
};

// The weights an export writes: the base's, with the adapter merged in when --merge names
// one, every floating tensor in `dtype` (Note [Adapters export merges] in export.cpp).
Exported exported_weights(const ExportArgs& a, const nn::TensorSource& source, DType dtype);
// Where the base's weights come from: a folder (model.safetensors or its shards), else a
// .safetensors or .gguf file; *file is set to the file the weights are read from.
nn::TensorSource base_weights(const ExportArgs& a, std::string* file);
// The base (and the file its weights come from) and the adapter's files as inputs of the
// output policy (Note [Output policy]), which no output may be.
void declare_inputs(const ExportArgs& a, const std::string& base_file, OutputPolicy& outputs);

// -o OUT.gguf (Note [GGUF files written] in export_gguf.cpp).
int64_t export_gguf(const ExportArgs& a, std::ostream& out);

}  // namespace fitgrad::apps
