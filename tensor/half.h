// IEEE binary16 (f16) and bfloat16 (bf16) storage types and their conversions to and
// from f32. Float -> half conversions round to nearest, ties to even, produce correctly
// signed zeros and subnormals, saturate to infinity on overflow and keep NaNs quiet NaNs.
// See Note [Half rounding by integer arithmetic].
#pragma once

#include <bit>
#include <cstdint>

namespace fitgrad {

// Note [Half rounding by integer arithmetic]
// Both conversions work on the f32 bit pattern, so they do not depend on the FPU
// rounding mode or on compiler support for _Float16/__bf16. bf16 is the top half of
// an f32: adding 0x7FFF plus the lowest kept bit rounds the dropped 16 bits to nearest
// even. f16 rebiases the exponent (127 -> 15); for results in f16's subnormal range
// the implicit leading 1 is made explicit and shifted right with a sticky-aware
// round-to-nearest-even. tests/tensor/half_test.cpp checks all 65,536 patterns both
// ways, and every midpoint between neighbours, against independent references.

inline float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);  // inf or NaN, payload kept
  } else if (exp != 0) {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal: normalise. Value = mant * 2^-24.
    int e = -1;
    do {
      mant <<= 1;
      ++e;
    } while ((mant & 0x400u) == 0);
    bits = sign | uint32_t(127 - 15 - e) << 23 | ((mant & 0x3FFu) << 13);
  }
  return std::bit_cast<float>(bits);
}

inline uint16_t f32_to_f16_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) {  // inf or NaN
    if (abs == 0x7F800000u) return sign | 0x7C00u;
    return uint16_t(sign | 0x7E00u | ((abs >> 13) & 0x3FFu));  // quiet NaN
  }
  const int32_t exp = int32_t(abs >> 23) - 127 + 15;
  if (exp >= 0x1F) return sign | 0x7C00u;  // overflow, already past the rounding range
  if (exp <= 0) {
    // f16 subnormal or zero: shift the full 24-bit significand right.
    if (exp < -10) return sign;  // below half the smallest subnormal: rounds to zero
    const uint32_t mant = (abs & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = uint32_t(14 - exp);  // 14..24
    uint32_t out = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (out & 1u))) ++out;
    return uint16_t(sign | out);
  }
  uint32_t out = (uint32_t(exp) << 10) | ((abs >> 13) & 0x3FFu);
  const uint32_t rem = abs & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (out & 1u))) ++out;  // may carry into inf
  return uint16_t(sign | out);
}

inline float bf16_bits_to_f32(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

inline uint16_t f32_to_bf16_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((x >> 16) | 0x0040u);  // quiet NaN
  const uint32_t lsb = (x >> 16) & 1u;
  return uint16_t((x + 0x7FFFu + lsb) >> 16);
}

// Storage types: 2 bytes, no arithmetic; convert to float to compute.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  explicit Half(float f) : bits(f32_to_f16_bits(f)) {}
  static Half from_bits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
  explicit operator float() const { return f16_bits_to_f32(bits); }
};

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f) : bits(f32_to_bf16_bits(f)) {}
  static BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
  explicit operator float() const { return bf16_bits_to_f32(bits); }
};

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2);

}  // namespace fitgrad
