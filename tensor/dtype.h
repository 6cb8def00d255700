// Element types. DESIGN.md: f32, f16, bf16, i32, i64, u8, i8. NF4 is packed u8 plus a
// quantization state (nn/), and TF32 is a matmul math mode, so neither is a DType.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tensor/half.h"

namespace fitgrad {

enum class DType : uint8_t { f32, f16, bf16, i32, i64, u8, i8 };

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f16, DType::bf16, DType::i32,
                                       DType::i64, DType::u8,  DType::i8};

size_t element_size(DType t);
std::string_view dtype_name(DType t);
// Parses "f32", "float32", "bf16", "bfloat16", "f16", "float16", "i32", ... .
DType parse_dtype(std::string_view name);
bool is_floating(DType t);

// The C++ storage type of each dtype, and back.
template <DType T>
struct DTypeTraits;
template <>
struct DTypeTraits<DType::f32> {
  using type = float;
};
template <>
struct DTypeTraits<DType::f16> {
  using type = Half;
};
template <>
struct DTypeTraits<DType::bf16> {
  using type = BFloat16;
};
template <>
struct DTypeTraits<DType::i32> {
  using type = int32_t;
};
template <>
struct DTypeTraits<DType::i64> {
  using type = int64_t;
};
template <>
struct DTypeTraits<DType::u8> {
  using type = uint8_t;
};
template <>
struct DTypeTraits<DType::i8> {
  using type = int8_t;
};

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<Half>() {
  return DType::f16;
}
template <>
constexpr DType dtype_of<BFloat16>() {
  return DType::bf16;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::i64;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::u8;
}
template <>
constexpr DType dtype_of<int8_t>() {
  return DType::i8;
}

// Calls fn(T{}) with T the storage type of `t`.
template <class Fn>
decltype(auto) dispatch_dtype(DType t, Fn&& fn) {
  switch (t) {
    case DType::f32: return fn(float{});
    case DType::f16: return fn(Half{});
    case DType::bf16: return fn(BFloat16{});
    case DType::i32: return fn(int32_t{});
    case DType::i64: return fn(int64_t{});
    case DType::u8: return fn(uint8_t{});
    case DType::i8: return fn(int8_t{});
  }
  __builtin_unreachable();
}

}  // namespace fitgrad
