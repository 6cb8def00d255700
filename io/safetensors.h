// safetensors: the checkpoint format of Hugging Face models. A file is an 8-byte
// little-endian header length N, then N bytes of JSON header, then the data section. The
// header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
// relative to the data section) and may hold "__metadata__", a string-to-string map.
//
// SafetensorsFile memory-maps a file and checks the whole header up front, so every later
// call works on a file known to be well formed; tensor() then views the mapped bytes
// without a copy. save_safetensors writes the same layout the reference implementation
// writes, atomically. Every error about a file is a fitgrad::Error that starts with
// "[safetensors <path>]" and names the tensor and the offsets at fault.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/atomic_file.h"
#include "io/mapped_file.h"
#include "tensor/tensor.h"

namespace fitgrad::io {

// One header entry; begin and end are byte offsets into the data section.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

class SafetensorsFile {
 public:
  // Maps `path` and validates the header: JSON types, dtypes, shapes, byte sizes, and
  // offsets that cover the data section exactly once. Throws fitgrad::Error on any fault.
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return path_; }
  // In data-section order (the order in which the tensors lie in the file).
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // A cpu tensor over the mapped bytes: no copy, and the mapping stays alive while any
  // such tensor does. See Note [Zero-copy tensors over the mapping]. Throws for an
  // unknown name.
  Tensor tensor(const std::string& name) const;
  std::map<std::string, Tensor> tensors() const;
  // Drops the resident pages of tensor `name` (Note [Dropping loaded pages] in
  // io/mapped_file.cpp): only once its bytes were copied out and no view of them is written.
  void drop_pages(const std::string& name) const;
  bool has(const std::string& name) const { return index_.count(name) > 0; }
  // The whole mapped file. These bytes are outside the memory ledger (Storage::wrap).
  const std::byte* mapped_data() const;
  size_t mapped_size() const;

 private:
  std::string path_;
  MappedFile file_;
  size_t data_start_ = 0;  // 8 + header length
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, size_t> index_;  // name -> position in entries_
  std::map<std::string, std::string> metadata_;
};

// Writes `tensors` in the given order (header and data alike) with `metadata` as
// "__metadata__" (omitted when empty). Any dtype, layout and device is written as its
// contiguous bytes; meta and undefined tensors, repeated names and the name
// "__metadata__" are errors. The file appears complete or not at all: it is written to a
// temporary file in the same folder and renamed over `path`.
void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});
// The same bytes written into `out`, an atomic file the caller commits (with its other
// outputs: apps/output_policy.h); `where` starts every error ("[export -o m.safetensors]").
void write_safetensors(AtomicFile& out, const std::string& where,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace fitgrad::io
