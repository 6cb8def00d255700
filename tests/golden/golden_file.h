// Reader of the PyTorch golden data in tests/golden/ (issue 3), written by gen_golden.py.
// The C++ tests read these committed files, so CI never needs torch.
//
// Format of a .gtb file ("fitgrad golden tensor bundle", version 1):
//
//   bytes [0, 8)           header length H, an unsigned 64-bit little-endian integer
//   bytes [8, 8 + H)       a UTF-8 JSON object (padded with spaces to a multiple of 8):
//                            { "format": "fitgrad-golden", "version": 1,
//                              "tensors": { name: { "dtype": "f32" | "i64",
//                                                   "shape": [d0, d1, ...],   // [] is 0-d
//                                                   "offset": bytes from the data start,
//                                                   "nbytes": numel * element size } },
//                              "meta": { ...case-specific values... } }
//   bytes [8 + H, end)     the data section: each tensor's elements row-major, little-endian
//                          (IEEE f32 or two's-complement i64), at its offset (8-aligned).
//
// Every malformation (short file, bad JSON, unknown dtype, a tensor running past the end,
// nbytes that disagree with the shape, a missing name) throws fitgrad::Error whose message
// starts with "[golden <path>]".
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace fitgrad::testing {

class GoldenFile {
 public:
  // Reads and validates the whole file.
  explicit GoldenFile(std::string path);

  const std::string& path() const { return path_; }
  // Tensor names in the file, sorted.
  std::vector<std::string> names() const;
  bool has(const std::string& name) const;
  // A fresh CPU tensor: f32 or i64, as stored. Throws when the name is missing.
  Tensor tensor(const std::string& name) const;
  // The case's "meta" object (an empty object when the file has none).
  const nlohmann::json& meta() const { return meta_; }

 private:
  std::string path_;
  nlohmann::json tensors_;
  nlohmann::json meta_;
  std::vector<char> data_;  // the data section
};

// FITGRAD_GOLDEN_DIR "/" file: where the committed golden files live.
std::string golden_path(const std::string& file);

}  // namespace fitgrad::testing
