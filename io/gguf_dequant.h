// ggml tensor types as GGUF files store them: their ids, names, block geometry, and the
// decoders that turn blocks of the quantized types fitgrad reads into f32.
//
// A ggml tensor is stored row by row along ne[0] (the fastest dimension), each row cut into
// blocks of block_size values that take type_size bytes; ne[0] is always a multiple of
// block_size. The types the decoders handle and their blocks (all little-endian, f16 is
// IEEE binary16):
//   F32, F16, BF16   one value per block.
//   Q8_0   32 values, 34 B: f16 d, i8 q[32];                     x = d * q
//   Q4_0   32 values, 18 B: f16 d, u8 qs[16];                    x = d * (q - 8)
//   Q4_1   32 values, 20 B: f16 d, f16 m, u8 qs[16];             x = d * q + m
//          value j < 16 is the low nibble of qs[j], value j + 16 its high nibble.
//   Q4_K   256 values, 144 B: f16 d, f16 dmin, u8 scales[12], u8 qs[128];
//          8 sub-blocks of 32 with a 6-bit scale sc and min m each (Note [K-quant scales]);
//          x = d * sc * q - dmin * m.
//   Q6_K   256 values, 210 B: u8 ql[128], u8 qh[64], i8 scales[16], f16 d;
//          16 sub-blocks of 16 with an 8-bit scale; x = d * scale * (q - 32), q 6 bits.
// Every other type is known by name and size, so a file that holds it still opens, but
// decoding it throws.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fitgrad::io {

// The ids are ggml's (ggml.h enum ggml_type); gaps are ids that ggml has retired.
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
};

struct GgmlTypeInfo {
  std::string_view name;   // "Q4_K", as ggml and llama.cpp print it
  int64_t block_size = 1;  // values per block
  int64_t type_size = 0;   // bytes per block
  bool dequantizable = false;
};

// The block geometry of a type id, or nullopt for an id this reader does not know.
std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id);
// "Q4_K", or "type 99" for an unknown id.
std::string ggml_type_name(uint32_t id);

// Decodes n values (a multiple of the type's block size) of a dequantizable type from
// `src` (n / block_size * type_size bytes) into dst. Throws fitgrad::Error for a type that
// cannot be decoded; the caller checks n and the byte count.
void dequantize(GgmlType type, const uint8_t* src, float* dst, int64_t n);

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K super-block's 12 scale
// bytes. See Note [K-quant scales] in gguf_dequant.cpp.
void k_quant_scale_min(int j, const uint8_t* scales, uint8_t* sc, uint8_t* m);

}  // namespace fitgrad::io
