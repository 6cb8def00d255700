// The ggml type table and the block decoders of gguf_dequant.h. Each decoder reads one
// block at a time with explicit little-endian loads, so it needs no alignment and no
// packed structs, and writes block_size floats.
#include "io/gguf_dequant.h"

#include <array>
#include <cstring>

#include "tensor/error.h"
#include "tensor/half.h"

namespace fitgrad::io {

namespace {

struct TypeRow {
  uint32_t id;
  GgmlTypeInfo info;
};

// Block sizes and bytes per block, from ggml's block layouts (ggml-common.h).
constexpr std::array kTypes = {
    TypeRow{0, {"F32", 1, 4, true}},          TypeRow{1, {"F16", 1, 2, true}},
    TypeRow{2, {"Q4_0", 32, 18, true}},       TypeRow{3, {"Q4_1", 32, 20, true}},
    TypeRow{6, {"Q5_0", 32, 22, false}},      TypeRow{7, {"Q5_1", 32, 24, false}},
    TypeRow{8, {"Q8_0", 32, 34, true}},       TypeRow{9, {"Q8_1", 32, 36, false}},
    TypeRow{10, {"Q2_K", 256, 84, false}},    TypeRow{11, {"Q3_K", 256, 110, false}},
    TypeRow{12, {"Q4_K", 256, 144, true}},    TypeRow{13, {"Q5_K", 256, 176, false}},
    TypeRow{14, {"Q6_K", 256, 210, true}},    TypeRow{15, {"Q8_K", 256, 292, false}},
    TypeRow{16, {"IQ2_XXS", 256, 66, false}}, TypeRow{17, {"IQ2_XS", 256, 74, false}},
    TypeRow{18, {"IQ3_XXS", 256, 98, false}}, TypeRow{19, {"IQ1_S", 256, 50, false}},
    TypeRow{20, {"IQ4_NL", 32, 18, false}},   TypeRow{21, {"IQ3_S", 256, 110, false}},
    TypeRow{22, {"IQ2_S", 256, 82, false}},   TypeRow{23, {"IQ4_XS", 256, 136, false}},
    TypeRow{24, {"I8", 1, 1, false}},         TypeRow{25, {"I16", 1, 2, false}},
    TypeRow{26, {"I32", 1, 4, false}},        TypeRow{27, {"I64", 1, 8, false}},
    TypeRow{28, {"F64", 1, 8, false}},        TypeRow{29, {"IQ1_M", 256, 56, false}},
    TypeRow{30, {"BF16", 1, 2, true}},        TypeRow{34, {"TQ1_0", 256, 54, false}},
    TypeRow{35, {"TQ2_0", 256, 66, false}},
};

inline uint16_t load_u16(const uint8_t* p) { return uint16_t(p[0] | (uint16_t(p[1]) << 8)); }
inline float load_f16(const uint8_t* p) { return f16_bits_to_f32(load_u16(p)); }
inline float load_f32(const uint8_t* p) {
  uint32_t bits =
      uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// 32 values: f16 d, i8 q[32].
void q8_0_block(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  for (int i = 0; i < 32; ++i) y[i] = d * float(int8_t(b[2 + i]));
}

// 32 values: f16 d, 16 bytes of nibbles.
void q4_0_block(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const uint8_t* qs = b + 2;
  for (int i = 0; i < 16; ++i) {
    y[i] = d * float(int(qs[i] & 0x0F) - 8);
    y[i + 16] = d * float(int(qs[i] >> 4) - 8);
  }
}

// 32 values: f16 d, f16 m, 16 bytes of nibbles.
void q4_1_block(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float m = load_f16(b + 2);
  const uint8_t* qs = b + 4;
  for (int i = 0; i < 16; ++i) {
    y[i] = d * float(qs[i] & 0x0F) + m;
    y[i + 16] = d * float(qs[i] >> 4) + m;
  }
}

// 256 values: f16 d, f16 dmin, 12 scale bytes, 128 bytes of nibbles. The nibbles come in
// four 32-byte groups; group g holds sub-block 2g in its low nibbles and 2g+1 in its high.
void q4_k_block(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float dmin = load_f16(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qs = b + 16;
  for (int g = 0; g < 4; ++g) {
    uint8_t sc_lo, m_lo, sc_hi, m_hi;
    k_quant_scale_min(2 * g, scales, &sc_lo, &m_lo);
    k_quant_scale_min(2 * g + 1, scales, &sc_hi, &m_hi);
    const float d_lo = d * float(sc_lo), min_lo = dmin * float(m_lo);
    const float d_hi = d * float(sc_hi), min_hi = dmin * float(m_hi);
    const uint8_t* q = qs + 32 * g;
    float* out = y + 64 * g;
    for (int l = 0; l < 32; ++l) {
      out[l] = d_lo * float(q[l] & 0x0F) - min_lo;
      out[l + 32] = d_hi * float(q[l] >> 4) - min_hi;
    }
  }
}

// 256 values: ql[128] (low 4 bits), qh[64] (high 2 bits), i8 scales[16], f16 d. Each half
// of 128 values uses 64 ql bytes, 32 qh bytes and 8 scales; within a half, value
// 32 * k + l (k = 0..3, l = 0..31) takes its low bits from ql[l + 32 * (k & 1)] (low
// nibble for k < 2, high for k >= 2), its high bits from bits 2k..2k+1 of qh[l], and
// scale k * 2 + l / 16.
void q6_k_block(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = load_f16(b + 208);
  for (int half = 0; half < 2; ++half) {
    for (int l = 0; l < 32; ++l) {
      const int s = l / 16;
      const int q0 = int((ql[l] & 0x0F) | ((qh[l] & 0x03) << 4)) - 32;
      const int q1 = int((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 0x03) << 4)) - 32;
      const int q2 = int((ql[l] >> 4) | (((qh[l] >> 4) & 0x03) << 4)) - 32;
      const int q3 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 0x03) << 4)) - 32;
      y[l] = d * float(sc[s + 0]) * float(q0);
      y[l + 32] = d * float(sc[s + 2]) * float(q1);
      y[l + 64] = d * float(sc[s + 4]) * float(q2);
      y[l + 96] = d * float(sc[s + 6]) * float(q3);
    }
    ql += 64;
    qh += 32;
    sc += 8;
    y += 128;
  }
}

template <class BlockFn>
void per_block(const uint8_t* src, float* dst, int64_t n, int64_t block, int64_t bytes,
               BlockFn fn) {
  for (int64_t i = 0; i < n / block; ++i) fn(src + i * bytes, dst + i * block);
}

}  // namespace

std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id) {
  for (const auto& row : kTypes)
    if (row.id == id) return row.info;
  return std::nullopt;
}

std::string ggml_type_name(uint32_t id) {
  if (auto info = ggml_type_info(id)) return std::string(info->name);
  return "type " + std::to_string(id);
}

// Note [K-quant scales]
// A Q4_K (and Q5_K) super-block has 8 sub-blocks, each with a 6-bit scale and a 6-bit
// min, packed into 12 bytes. Bytes 0..3 hold the scales of sub-blocks 0..3 in their low 6
// bits, bytes 4..7 the mins of sub-blocks 0..3 likewise. Sub-blocks 4..7 keep their low 4
// bits in bytes 8..11 (scale in the low nibble, min in the high nibble) and their top 2
// bits in the otherwise unused top 2 bits of bytes 0..3 (scales) and 4..7 (mins).
void k_quant_scale_min(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = uint8_t((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
    *m = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

void dequantize(GgmlType type, const uint8_t* src, float* dst, int64_t n) {
  switch (type) {
    case GgmlType::F32:
      for (int64_t i = 0; i < n; ++i) dst[i] = load_f32(src + 4 * i);
      return;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) dst[i] = load_f16(src + 2 * i);
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_bits_to_f32(load_u16(src + 2 * i));
      return;
    case GgmlType::Q8_0: per_block(src, dst, n, 32, 34, q8_0_block); return;
    case GgmlType::Q4_0: per_block(src, dst, n, 32, 18, q4_0_block); return;
    case GgmlType::Q4_1: per_block(src, dst, n, 32, 20, q4_1_block); return;
    case GgmlType::Q4_K: per_block(src, dst, n, 256, 144, q4_k_block); return;
    case GgmlType::Q6_K: per_block(src, dst, n, 256, 210, q6_k_block); return;
    default: break;
  }
  throw Error(
      fmt::format("[gguf] cannot dequantize ggml type {} (supported: F32, F16, BF16, "
                  "Q8_0, Q4_0, Q4_1, Q4_K, Q6_K)",
                  ggml_type_name(uint32_t(type))));
}

}  // namespace fitgrad::io
