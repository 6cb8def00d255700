// GGUF: the file format of llama.cpp and ggml. GgufFile reads versions 2 and 3 (the same
// little-endian layout; v1 used 32-bit counts and is refused):
//
//   "GGUF"  u32 version  u64 tensor_count  u64 metadata_kv_count
//   metadata_kv_count x { string key, u32 value_type, value }
//   tensor_count x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset }
//   padding to general.alignment (default 32), then the data section; each tensor's offset
//   is relative to the data section and a multiple of the alignment.
//
// A string is a u64 byte length and that many bytes (no terminator). A value is one of
// u8 i8 u16 i16 u32 i32 f32 bool string u64 i64 f64, or an array: u32 element type, u64
// count, then the elements (arrays of strings and of arrays included).
//
// open() memory-maps the file and checks everything up front: the header, every metadata
// value, every tensor info (n_dims 1..4, at most 2^40 elements, ne[0] a whole number of
// blocks, a known ggml type, aligned offset, data inside the file, unique names), so later
// calls work on a file known to be well formed. Every error about a file is a
// fitgrad::Error that starts with "[gguf <path>]" and names the fault and where it is.
//
// Shapes: ggml lists dims fastest first (ne[0] is the contiguous one). tensor() returns
// fitgrad's row-major shape, the reverse: a weight with ne = [in, out] becomes (out, in),
// as in PyTorch's nn.Linear.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "io/gguf_dequant.h"
#include "io/mapped_file.h"
#include "tensor/tensor.h"

namespace fitgrad::io {

// The metadata value types (their ids in the file).
enum class GgufType : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};
std::string_view gguf_type_name(GgufType t);

// One metadata value. Integers are held widened (unsigned in u64, signed in i64), floats
// in double, and arrays as a vector of the widened element type; type() and, for arrays,
// element_type() tell what the file stored. The as_* accessors throw fitgrad::Error
// (starting "[gguf]", GgufMetadata adds the file and key) when the value does not fit.
class GgufValue {
 public:
  using Array = std::vector<GgufValue>;  // arrays of arrays only
  using Data = std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<uint64_t>,
                            std::vector<int64_t>, std::vector<double>, std::vector<bool>,
                            std::vector<std::string>, Array>;

  GgufValue(GgufType type, Data data, GgufType element_type = GgufType::u8)
      : type_(type), element_type_(element_type), data_(std::move(data)) {}

  GgufType type() const { return type_; }
  GgufType element_type() const { return element_type_; }  // arrays only
  bool is_array() const { return type_ == GgufType::array; }
  const Data& data() const { return data_; }
  // Elements of an array; 0 for a scalar.
  size_t size() const;

  // Scalars. Integer accessors take any integer type whose value fits the result.
  uint64_t as_u64() const;
  int64_t as_i64() const;
  uint32_t as_u32() const;
  int32_t as_i32() const;
  double as_f64() const;  // f32, f64, or an integer
  float as_f32() const { return float(as_f64()); }
  bool as_bool() const;
  const std::string& as_string() const;
  // Arrays, with the same element rules.
  const std::vector<std::string>& as_string_array() const;
  std::vector<int64_t> as_i64_array() const;
  std::vector<int32_t> as_i32_array() const;
  std::vector<float> as_f32_array() const;

  // For listings: scalars in full (strings quoted, shortened past `max_chars`), arrays as
  // "[u32 x 49152] [3, 3, 3, ...]".
  std::string str(size_t max_chars = 60) const;

 private:
  GgufType type_;
  GgufType element_type_;
  Data data_;
};

// The key-value metadata, in file order, with lookups that name the file and the key
// when they fail: "[gguf model.gguf] metadata key 'llama.block_count' is missing".
class GgufMetadata {
 public:
  GgufMetadata() = default;
  explicit GgufMetadata(std::string path) : path_(std::move(path)) {}

  bool has(const std::string& key) const { return index_.count(key) != 0; }
  const GgufValue& get(const std::string& key) const;
  const std::vector<std::pair<std::string, GgufValue>>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }

  const std::string& get_string(const std::string& key) const;
  uint32_t get_u32(const std::string& key) const;
  uint64_t get_u64(const std::string& key) const;
  int64_t get_i64(const std::string& key) const;
  float get_f32(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  const std::vector<std::string>& get_string_array(const std::string& key) const;
  std::vector<int32_t> get_i32_array(const std::string& key) const;
  std::vector<float> get_f32_array(const std::string& key) const;

  // Used by the parser; false when the key is already present.
  bool insert(std::string key, GgufValue value);

 private:
  template <class Fn>
  decltype(auto) typed(const std::string& key, const char* what, Fn&& fn) const;

  std::string path_;
  std::vector<std::pair<std::string, GgufValue>> entries_;
  std::map<std::string, size_t> index_;
};

struct GgufTensorInfo {
  std::string name;
  uint32_t type = 0;        // ggml type id (GgmlType when known)
  std::vector<int64_t> ne;  // dims as stored: ne[0] is the fastest
  uint64_t offset = 0;      // bytes from the start of the data section
  uint64_t nbytes = 0;      // bytes of data
  int64_t numel = 0;

  GgmlType ggml_type() const { return GgmlType(type); }
  std::string type_name() const { return ggml_type_name(type); }
  // Row-major shape: ne reversed.
  Shape shape() const { return Shape(ne.rbegin(), ne.rend()); }
};

class GgufFile {
 public:
  // Maps `path` and validates it as described at the top. Throws fitgrad::Error.
  static GgufFile open(const std::string& path);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  // Byte offset of the data section in the file.
  uint64_t data_offset() const { return data_start_; }
  uint64_t file_size() const;
  const GgufMetadata& metadata() const { return metadata_; }
  // In file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  bool has_tensor(const std::string& name) const { return index_.count(name) != 0; }
  const GgufTensorInfo& info(const std::string& name) const;

  // The tensor decoded into a new cpu tensor of dtype `out` (f32, f16 or bf16), row-major
  // shape (ne reversed). It is allocated through the allocator under the caller's memory
  // context. F16 to f16 and BF16 to bf16 copy the bits; everything else goes through f32.
  // Throws for an unknown name, a type that cannot be decoded (naming tensor and type) or
  // a non-floating `out`.
  Tensor tensor(const std::string& name, DType out = DType::f32) const;
  // A cpu tensor over the mapped bytes (no copy) for F32, F16 and BF16 tensors: the
  // mapping is private, so writes to it never reach the file. The mapping stays alive
  // while any such tensor does, and its bytes are outside the memory ledger.
  Tensor mapped_tensor(const std::string& name) const;
  // The raw stored bytes of a tensor (quantized blocks as they lie in the file).
  const uint8_t* tensor_data(const std::string& name) const;

 private:
  std::string path_;
  MappedFile file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_start_ = 0;
  GgufMetadata metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> index_;
};

}  // namespace fitgrad::io
