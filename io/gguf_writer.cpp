// GgufWriter (gguf_writer.h).
#include "io/gguf_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "io/gguf.h"
#include "tensor/convert.h"
#include "tensor/error.h"
#include "tensor/interrupt.h"

namespace fitgrad::io {
namespace {

constexpr uint64_t kAlignment = 32;

template <class T>
void put_raw(std::vector<uint8_t>& b, T v) {
  uint8_t raw[sizeof(T)];
  std::memcpy(raw, &v, sizeof(T));
  b.insert(b.end(), raw, raw + sizeof(T));
}
void put_string(std::vector<uint8_t>& b, const std::string& s) {
  put_raw<uint64_t>(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}
void put_key(std::vector<uint8_t>& b, const std::string& key, GgufType type) {
  put_string(b, key);
  put_raw<uint32_t>(b, uint32_t(type));
}

}  // namespace

template <class T>
void GgufWriter::put_scalar(const std::string& key, GgufType type, T value) {
  put_key(metadata_, key, type);
  put_raw(metadata_, value);
  ++kv_count_;
}

template <class T>
void GgufWriter::put_array(const std::string& key, GgufType type, const std::vector<T>& values) {
  put_key(metadata_, key, GgufType::array);
  put_raw<uint32_t>(metadata_, uint32_t(type));
  put_raw<uint64_t>(metadata_, values.size());
  for (const T v : values) put_raw(metadata_, v);
  ++kv_count_;
}

void GgufWriter::put(const std::string& key, const std::string& value) {
  put_key(metadata_, key, GgufType::string);
  put_string(metadata_, value);
  ++kv_count_;
}
void GgufWriter::put_u32(const std::string& key, uint32_t value) {
  put_scalar(key, GgufType::u32, value);
}
void GgufWriter::put_i32(const std::string& key, int32_t value) {
  put_scalar(key, GgufType::i32, value);
}
void GgufWriter::put_f32(const std::string& key, float value) {
  put_scalar(key, GgufType::f32, value);
}
void GgufWriter::put_bool(const std::string& key, bool value) {
  put_scalar(key, GgufType::boolean, uint8_t(value ? 1 : 0));
}
void GgufWriter::put(const std::string& key, const std::vector<std::string>& values) {
  put_key(metadata_, key, GgufType::array);
  put_raw<uint32_t>(metadata_, uint32_t(GgufType::string));
  put_raw<uint64_t>(metadata_, values.size());
  for (const std::string& v : values) put_string(metadata_, v);
  ++kv_count_;
}
void GgufWriter::put(const std::string& key, const std::vector<float>& values) {
  put_array(key, GgufType::f32, values);
}
void GgufWriter::put(const std::string& key, const std::vector<int32_t>& values) {
  put_array(key, GgufType::i32, values);
}

std::string quantize_q8_0(const float* x, int64_t n) {
  FG_CHECK(n % 32 == 0, "[gguf] Q8_0 needs a multiple of 32 values, got {}", n);
  std::string out(size_t(n / 32 * 34), '\0');
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* v = x + b * 32;
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(v[i]));
    const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
    const Half h = convert<Half>(d);
    char* block = out.data() + b * 34;
    std::memcpy(block, &h, 2);
    for (int i = 0; i < 32; ++i) block[2 + i] = char(int8_t(std::lround(v[i] * id)));
  }
  return out;
}

void GgufWriter::tensor(const std::string& name, const Tensor& t, GgmlType type) {
  Info info{name, {}, type, {}};
  for (int64_t d = t.dim() - 1; d >= 0; --d) info.ne.push_back(uint64_t(t.size(d)));
  if (info.ne.empty()) info.ne.push_back(1);
  const auto bytes = [](const Tensor& c) {
    return std::string(static_cast<const char*>(c.data_ptr()), size_t(c.nbytes()));
  };
  switch (type) {
    case GgmlType::F32: info.data = bytes(t.to(DType::f32).contiguous()); break;
    case GgmlType::F16: info.data = bytes(t.to(DType::f16).contiguous()); break;
    case GgmlType::BF16: info.data = bytes(t.to(DType::bf16).contiguous()); break;
    case GgmlType::Q8_0: {
      const Tensor f = t.to(DType::f32).contiguous();
      FG_CHECK(info.ne[0] % 32 == 0, "[gguf] {}: Q8_0 needs rows of a multiple of 32, got {}", name,
               info.ne[0]);
      info.data = quantize_q8_0(f.data<float>(), f.numel());
      break;
    }
    default:
      throw Error(fmt::format("[gguf] {}: writing type {} is not supported", name,
                              ggml_type_name(uint32_t(type))));
  }
  tensors_.push_back(std::move(info));
}

void GgufWriter::write(AtomicFile& file) const {
  std::vector<uint8_t> head;
  head.insert(head.end(), {'G', 'G', 'U', 'F'});
  put_raw<uint32_t>(head, 3);
  put_raw<uint64_t>(head, tensors_.size());
  put_raw<uint64_t>(head, kv_count_);
  head.insert(head.end(), metadata_.begin(), metadata_.end());
  uint64_t offset = 0;
  for (const Info& t : tensors_) {
    put_string(head, t.name);
    put_raw<uint32_t>(head, uint32_t(t.ne.size()));
    for (const uint64_t n : t.ne) put_raw(head, n);
    put_raw<uint32_t>(head, uint32_t(t.type));
    put_raw<uint64_t>(head, offset);
    offset += (t.data.size() + kAlignment - 1) / kAlignment * kAlignment;
  }
  head.resize((head.size() + kAlignment - 1) / kAlignment * kAlignment, 0);
  file.write(head.data(), head.size());
  const std::string zeros(kAlignment, '\0');
  for (const Info& t : tensors_) {
    interruption_point();  // Note [Interruption points]: each tensor written
    file.write(t.data.data(), t.data.size());
    const size_t pad = (kAlignment - t.data.size() % kAlignment) % kAlignment;
    file.write(zeros.data(), pad);
  }
}

}  // namespace fitgrad::io
