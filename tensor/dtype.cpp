// DType names, sizes and parsing.
#include "tensor/dtype.h"

#include "tensor/error.h"

namespace fitgrad {

size_t element_size(DType t) {
  return dispatch_dtype(t, [](auto v) { return sizeof(v); });
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
    case DType::i8: return "i8";
  }
  return "?";
}

DType parse_dtype(std::string_view name) {
  for (DType t : kAllDTypes)
    if (name == dtype_name(t)) return t;
  if (name == "float32" || name == "float") return DType::f32;
  if (name == "float16" || name == "half") return DType::f16;
  if (name == "bfloat16") return DType::bf16;
  if (name == "int32") return DType::i32;
  if (name == "int64") return DType::i64;
  if (name == "uint8") return DType::u8;
  if (name == "int8") return DType::i8;
  throw Error(fmt::format(
      "[dtype] unknown dtype '{}' (expected f32, f16, bf16, i32, i64, u8 or i8)", name));
}

bool is_floating(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

}  // namespace fitgrad
