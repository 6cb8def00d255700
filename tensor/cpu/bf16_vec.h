// bf16 in a level's native float vector V (Note [Kernel ISA variants] in vec.h), for kernels
// that read or write bf16 rows in registers instead of staging them through f32 memory. A
// bf16 value is the high half of an f32's bits, so widening is a zero extension and a shift,
// exact; rounding adds 0x7FFF plus the kept part's lowest bit before the shift (round to
// nearest, ties to even), and a NaN keeps its high half with the quiet bit set: element for
// element the values of bf16_bits_to_f32 and f32_to_bf16_bits (tensor/half.h).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "tensor/cpu/vec.h"
#include "tensor/half.h"

namespace fitgrad::cpu {

// V's lane count of halves and of unsigned words.
template <class V>
struct Bf16Words {
  static constexpr int W = kLanes<V>;
  using H [[gnu::vector_size(2 * W)]] = uint16_t;
  using U [[gnu::vector_size(4 * W)]] = uint32_t;
};

// The kLanes<V> bf16 values at p, widened.
template <class V>
[[gnu::always_inline]] inline V load_bf16(const BFloat16* p) {
  using H = typename Bf16Words<V>::H;
  using U = typename Bf16Words<V>::U;
  H h;
  std::memcpy(&h, p, sizeof h);
  return std::bit_cast<V>(__builtin_convertvector(h, U) << 16);
}

// The first n < kLanes<V> bf16 values at p, widened, the other lanes `fill`.
template <class V>
[[gnu::always_inline]] inline V load_bf16_partial(const BFloat16* p, int64_t n, float fill) {
  V v = splat<V>(fill);
  for (int64_t i = 0; i < n; ++i) v[i] = bf16_bits_to_f32(p[i].bits);
  return v;
}

// v's kLanes<V> floats rounded to bf16 at p.
template <class V>
[[gnu::always_inline]] inline void store_bf16(BFloat16* p, const V& v) {
  using H = typename Bf16Words<V>::H;
  using U = typename Bf16Words<V>::U;
  const U x = std::bit_cast<U>(v);
  const U rounded = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
  const U bits = (x & 0x7FFFFFFFu) > 0x7F800000u ? ((x >> 16) | 0x0040u) : rounded;
  const H h = __builtin_convertvector(bits, H);
  std::memcpy(static_cast<void*>(p), &h, sizeof h);
}

// v's first n < kLanes<V> floats rounded to bf16 at p.
template <class V>
[[gnu::always_inline]] inline void store_bf16_partial(BFloat16* p, const V& v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) p[i] = BFloat16(float(v[i]));
}

}  // namespace fitgrad::cpu
