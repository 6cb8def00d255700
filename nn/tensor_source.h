// A model's weights as a loader reads them: every entry's name, shape and dtype up front,
// and each value on demand, so a load checks the whole file first and then holds one
// decoded tensor at a time (Note [Streaming loads]).
//
// Note [Streaming loads]
// A GGUF tensor is decoded (dequantized from Q4_1, say) into a new tensor, and a
// bitsandbytes 4-bit weight of a safetensors file is dequantized; a loader that decoded
// them all before copying would hold the model twice, and a QLoRA load would hold it in
// 16 or 32 bits, which the 4-bit base exists to avoid. Module::load and
// nn::load_into_adapted therefore check every name, shape and dtype against the entries
// first (nothing is changed when anything is wrong), then read, copy (or quantize) and
// free one entry at a time: peak memory is the model plus its largest tensor decoded.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace fitgrad::nn {

struct TensorSource {
  struct Entry {
    std::string name;
    Shape shape;
    DType dtype = DType::f32;  // what read() returns
    bool defined = true;       // false: an undefined tensor (an error for load)
    bool keep = false;         // the parameter keeps its value (never read)
  };
  std::vector<Entry> entries;
  // The entry's value, any device and layout; called once per entry a load uses.
  std::function<Tensor(const std::string& name)> read;
  // Optional: a loader calls it once it has copied entry `name` out of what read returned,
  // so a mapped source can drop the entry's pages (Note [Dropping loaded pages] in
  // io/mapped_file.cpp). Null for sources with nothing to drop.
  std::function<void(const std::string& name)> release;

  // The tensors of a map (read returns them, nothing is copied).
  static TensorSource of(const std::map<std::string, Tensor>& state);
  // Every entry read into a map (what a caller that needs all at once asks for).
  std::map<std::string, Tensor> read_all() const;
  // The same entries read as meta tensors with no bytes and no ledger entry: what a dry run
  // loads in place of a mapped file (zero-copy reads make no allocation either), so that it
  // allocates what the real load allocates (Note [Dry run on meta] in train/train_run.h).
  TensorSource meta_views() const;
};

}  // namespace fitgrad::nn
