// Portable 16-float vectors for the hand-vectorised CPU kernels (flash-attention tiles,
// fused cross-entropy): GCC/Clang vector extensions, which each target clone lowers to its
// own registers (one zmm, two ymm or four xmm), the load/store/splat helpers, and our
// vectorised exp.
//
// Note [Kernel target clones]
// The library is built for baseline x86-64 unless FITGRAD_NATIVE is on, so a hot kernel
// marked FITGRAD_SIMD_CLONES is also compiled for AVX2+FMA and AVX-512 (GCC target_clones)
// and the dynamic loader picks the widest one the CPU has (ifunc), once per process.
// Other compilers and targets get the single build. The helpers below are always_inline,
// so inside a clone they compile for the clone's target and vectors never cross a call
// (which is why GCC's -Wpsabi note about passing them by value does not apply).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define FITGRAD_SIMD_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FITGRAD_SIMD_CLONES
#endif

#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace fitgrad::cpu {

using Vec = float __attribute__((vector_size(64)));     // 16 floats
using IVec = int32_t __attribute__((vector_size(64)));  // 16 int32
using DVec = double __attribute__((vector_size(128)));  // 16 doubles
inline constexpr int kVecWidth = 16;

[[gnu::always_inline]] inline Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
[[gnu::always_inline]] inline void store(float* p, const Vec& v) { std::memcpy(p, &v, sizeof v); }
[[gnu::always_inline]] inline Vec splat(float x) { return Vec{} + x; }
// The first n < kVecWidth floats of p, the other lanes `fill`.
[[gnu::always_inline]] inline Vec load_partial(const float* p, int64_t n, float fill) {
  Vec v = splat(fill);
  std::memcpy(&v, p, size_t(n) * sizeof(float));
  return v;
}
[[gnu::always_inline]] inline void store_partial(float* p, const Vec& v, int64_t n) {
  std::memcpy(p, &v, size_t(n) * sizeof(float));
}

// e^x lane-wise, to ~1 ulp for x in [-87, 88.3]; 0 below (including -inf), clamped above
// (no inf), NaN in, NaN out. x = n ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2),
// e^r by its degree-7 Taylor polynomial (truncation error < 5e-9 relative), 2^n built in
// the exponent bits. n is rounded with the 1.5 * 2^23 trick and read from t's low bits, so
// there is no float-to-int conversion and no libm call.
[[gnu::always_inline]] inline Vec fast_exp(const Vec& x) {
  const Vec lo = splat(-87.5f), hi = splat(88.3f), round = splat(12582912.0f);  // 1.5 * 2^23
  const Vec ln2_hi = splat(0.693145751953125f);  // 12 significant bits: n * ln2_hi is exact
  const Vec ln2_lo = splat(1.42860682030941723e-6f);
  Vec xc = x > hi ? hi : x;  // NaN fails both tests and stays NaN
  xc = xc < lo ? lo : xc;
  const Vec t = xc * 1.44269504088896341f + round;
  const Vec n = t - round;
  const IVec ni = std::bit_cast<IVec>(t) - std::bit_cast<IVec>(round);
  const Vec r = (xc - n * ln2_hi) - n * ln2_lo;
  Vec p = splat(1.0f / 5040);
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const Vec two_n = std::bit_cast<Vec>((ni + 127) << 23);
  return x < splat(-87.0f) ? splat(0.0f) : p * two_n;
}

}  // namespace fitgrad::cpu
