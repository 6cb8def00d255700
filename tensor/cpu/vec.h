// Portable 16-float vectors for the hand-vectorised CPU kernels (flash-attention tiles,
// fused cross-entropy): GCC/Clang vector extensions, which each ISA variant lowers to its
// own registers (one zmm, two ymm or four xmm), the load/store/splat helpers, our
// vectorised exp, and FITGRAD_ISA_KERNEL, which compiles a kernel per ISA level.
//
// Note [Kernel ISA variants]
// The library is built for baseline x86-64 unless FITGRAD_NATIVE is on, so a hot kernel
// defined with FITGRAD_ISA_KERNEL is compiled three times, for AVX-512 (x86-64-v4), AVX2+FMA
// (x86-64-v3) and the baseline, and the first call picks the variant of the ISA level in
// force (cpu_isa(), Note [CPU ISA levels] in tensor/cpu_isa.cpp), so FITGRAD_CPU_ISA forces the lower
// ones and the tests run each one a machine can execute. (GCC's target_clones, used before,
// let the loader choose, which no variable can lower.) The kernel's body is an always_inline
// template NAME_body<CpuIsa>, so it compiles for each variant's target and can choose its
// register blocking per level: AVX2 has 16 vector registers to AVX-512's 32 (Note
// [Attention tile kernels]). A body must not hold an OpenMP region: GCC outlines the region
// before inlining, for the baseline target; the region calls the kernel instead. The
// helpers below are always_inline too, so inside a variant they compile for its target and
// vectors never cross a call (which is why GCC's -Wpsabi note about passing them by value
// does not apply). Other compilers and targets compile all three variants for the baseline.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <utility>

#include "tensor/cpu_isa.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define FITGRAD_TARGET_AVX512 __attribute__((target("arch=x86-64-v4")))
#define FITGRAD_TARGET_AVX2 __attribute__((target("arch=x86-64-v3")))
#else
#define FITGRAD_TARGET_AVX512
#define FITGRAD_TARGET_AVX2
#endif

// Defines `ret name params`, which runs name##_body<level>(args) compiled for the ISA level
// in force; params is the parenthesised parameter list and args the matching arguments.
#define FITGRAD_ISA_KERNEL(ret, name, params, args)                                           \
  FITGRAD_TARGET_AVX512 static ret name##_avx512 params {                                     \
    return name##_body<::fitgrad::CpuIsa::avx512> args;                                       \
  }                                                                                           \
  FITGRAD_TARGET_AVX2 static ret name##_avx2 params {                                         \
    return name##_body<::fitgrad::CpuIsa::avx2> args;                                         \
  }                                                                                           \
  static ret name##_portable params { return name##_body<::fitgrad::CpuIsa::portable> args; } \
  ret name params {                                                                           \
    static ret(*const variant) params =                                                       \
        ::fitgrad::cpu::isa_variant(name##_avx512, name##_avx2, name##_portable);             \
    return variant args;                                                                      \
  }

#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace fitgrad::cpu {

using Vec = float __attribute__((vector_size(64)));     // 16 floats
using IVec = int32_t __attribute__((vector_size(64)));  // 16 int32
using DVec = double __attribute__((vector_size(128)));  // 16 doubles
inline constexpr int kVecWidth = 16;
using Vec8 = float __attribute__((vector_size(32)));
using IVec8 = int32_t __attribute__((vector_size(32)));
using DVec8 = double __attribute__((vector_size(64)));
using Vec4 = float __attribute__((vector_size(16)));
using IVec4 = int32_t __attribute__((vector_size(16)));
using DVec4 = double __attribute__((vector_size(32)));

// The float vector a level's registers hold (zmm, ymm or xmm), its int32 and double
// companions of as many lanes, and that lane count. A vector wider than the registers
// compiles, but GCC lowers its compares and selects lane by lane and keeps arrays of it in
// memory, so a kernel variant computes in its level's native vector (Note [Kernel ISA
// variants]); results then differ between levels only in how sums are split into lanes.
template <CpuIsa kIsa>
struct Native {
  using F = Vec;
  using I = IVec;
  using D = DVec;
};
template <>
struct Native<CpuIsa::avx2> {
  using F = Vec8;
  using I = IVec8;
  using D = DVec8;
};
template <>
struct Native<CpuIsa::portable> {
  using F = Vec4;
  using I = IVec4;
  using D = DVec4;
};
template <class V>
inline constexpr int kLanes = int(sizeof(V) / sizeof(float));

template <class V>
struct IntVecOf;
template <>
struct IntVecOf<Vec> {
  using type = IVec;
};
template <>
struct IntVecOf<Vec8> {
  using type = IVec8;
};
template <>
struct IntVecOf<Vec4> {
  using type = IVec4;
};

// The variant of the ISA level in force (FITGRAD_ISA_KERNEL).
template <class F>
F isa_variant(F avx512, F avx2, F portable) {
  const CpuIsa isa = cpu_isa();
  return isa >= CpuIsa::avx512 ? avx512 : isa >= CpuIsa::avx2 ? avx2 : portable;
}

template <class V = Vec>
[[gnu::always_inline]] inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class V>
[[gnu::always_inline]] inline void store(float* p, const V& v) {
  std::memcpy(p, &v, sizeof v);
}
template <class V = Vec>
[[gnu::always_inline]] inline V splat(float x) {
  return V{} + x;
}
// The first n < kLanes<V> floats of p, the other lanes `fill`.
template <class V = Vec>
[[gnu::always_inline]] inline V load_partial(const float* p, int64_t n, float fill) {
  V v = splat<V>(fill);
  std::memcpy(&v, p, size_t(n) * sizeof(float));
  return v;
}
template <class V>
[[gnu::always_inline]] inline void store_partial(float* p, const V& v, int64_t n) {
  std::memcpy(p, &v, size_t(n) * sizeof(float));
}

// e^x lane-wise, to ~1 ulp for x in [-87, 88.3]; 0 below (including -inf), clamped above
// (no inf), NaN in, NaN out. x = n ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2),
// e^r by its degree-7 Taylor polynomial (truncation error < 5e-9 relative), 2^n built in
// the exponent bits. n is rounded with the 1.5 * 2^23 trick and read from t's low bits, so
// there is no float-to-int conversion and no libm call. The same operations in every lane
// whatever the vector's width.
template <class V>
[[gnu::always_inline]] inline V fast_exp(const V& x) {
  using I = typename IntVecOf<V>::type;
  const V lo = splat<V>(-87.5f), hi = splat<V>(88.3f);
  const V round = splat<V>(12582912.0f);          // 1.5 * 2^23
  const V ln2_hi = splat<V>(0.693145751953125f);  // 12 significant bits: n * ln2_hi is exact
  const V ln2_lo = splat<V>(1.42860682030941723e-6f);
  V xc = x > hi ? hi : x;  // NaN fails both tests and stays NaN
  xc = xc < lo ? lo : xc;
  const V t = xc * 1.44269504088896341f + round;
  const V n = t - round;
  const I ni = std::bit_cast<I>(t) - std::bit_cast<I>(round);
  const V r = (xc - n * ln2_hi) - n * ln2_lo;
  V p = splat<V>(1.0f / 5040);
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const V two_n = std::bit_cast<V>((ni + 127) << 23);
  return x < splat<V>(-87.0f) ? splat<V>(0.0f) : p * two_n;
}

// Note [In-register transpose]
// r[0 .. W) (W = kLanes<V>) as the rows of a W x W block becomes its transpose, by the
// recursive block swap: at block size h = W/2, W/4, ..., 1 the top-right h x h block of every
// 2h x 2h block trades places with the bottom-left one. Each swap is one two-source shuffle per
// row (__builtin_shufflevector with constant lanes: vpermt2ps on AVX-512), W log2 W shuffles in
// all against W^2 scalar loads and stores for an element-by-element transpose.
// __builtin_shufflevector is the one spelling GCC (12 on) and clang share; GCC's
// __builtin_shuffle does not exist in clang, whose fuzz build compiles these kernels too.
template <int W, int H, bool kLower>
constexpr int block_swap_lane(int j) {
  // Row i (upper, i & H == 0) keeps its lanes j & H == 0 and takes row i + H's lanes j - H;
  // row i + H (lower) takes row i's lanes j + H and keeps its lanes j & H != 0.
  return kLower ? ((j & H) == 0 ? j + H : W + j) : ((j & H) == 0 ? j : W + j - H);
}

template <int H, bool kLower, class V, int... J>
[[gnu::always_inline]] inline V block_swap(const V& a, const V& b,
                                           std::integer_sequence<int, J...>) {
  return __builtin_shufflevector(a, b, block_swap_lane<sizeof...(J), H, kLower>(J)...);
}

template <class V, int H = kLanes<V> / 2>
[[gnu::always_inline]] inline void transpose_block(V (&r)[kLanes<V>]) {
  constexpr int W = kLanes<V>;
  constexpr auto lanes = std::make_integer_sequence<int, W>{};
#pragma GCC unroll 16
  for (int i = 0; i < W; ++i) {
    if (i & H) continue;
    const V a = r[i], b = r[i + H];
    r[i] = block_swap<H, false>(a, b, lanes);
    r[i + H] = block_swap<H, true>(a, b, lanes);
  }
  if constexpr (H > 1) transpose_block<V, H / 2>(r);
}

}  // namespace fitgrad::cpu
