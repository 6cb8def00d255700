// Writing GGUF v3 files (the layout io/gguf.h reads): metadata of the value types llama.cpp's
// converter writes (strings, u32, i32, f32, bool, and arrays of strings, f32 and i32) and
// tensors of F32, F16, BF16 or Q8_0, each tensor's data aligned to general.alignment (32).
// The file goes through an io::AtomicFile, so it appears whole or not at all.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/atomic_file.h"
#include "io/gguf_dequant.h"
#include "tensor/tensor.h"

namespace fitgrad::io {

enum class GgufType : uint32_t;  // io/gguf.h

class GgufWriter {
 public:
  void put(const std::string& key, const std::string& value);
  void put(const std::string& key, const char* value) { put(key, std::string(value)); }
  void put_u32(const std::string& key, uint32_t value);
  void put_i32(const std::string& key, int32_t value);
  void put_f32(const std::string& key, float value);
  void put_bool(const std::string& key, bool value);
  void put(const std::string& key, const std::vector<std::string>& values);
  void put(const std::string& key, const std::vector<float>& values);
  void put(const std::string& key, const std::vector<int32_t>& values);

  // A tensor of row-major shape `shape` (stored, as ggml does, fastest dim first) encoded as
  // `type` from t (any floating dtype; Q8_0 needs the last dim a multiple of 32).
  void tensor(const std::string& name, const Tensor& t, GgmlType type);

  // Writes header, metadata, tensor infos and data into `file`.
  void write(AtomicFile& file) const;

 private:
  template <class T>
  void put_scalar(const std::string& key, GgufType type, T value);
  template <class T>
  void put_array(const std::string& key, GgufType type, const std::vector<T>& values);

  struct Info {
    std::string name;
    std::vector<uint64_t> ne;  // fastest first
    GgmlType type;
    std::string data;
  };
  std::vector<uint8_t> metadata_;
  uint64_t kv_count_ = 0;
  std::vector<Info> tensors_;
};

// The Q8_0 blocks of n values (n a multiple of 32): per block an f16 scale d = max|x| / 127
// and 32 int8 q = round(x / d), as ggml's quantize_row_q8_0_ref.
std::string quantize_q8_0(const float* x, int64_t n);

}  // namespace fitgrad::io
