// bf16 <-> f32 runs (see bf16_rows.h), a native vector at a time with the conversions of
// bf16_vec.h, the tail element by element with those of tensor/half.h.
#include "tensor/cpu/bf16_rows.h"

#include "tensor/cpu/bf16_vec.h"

namespace fitgrad::cpu {
namespace {

template <CpuIsa kIsa>
[[gnu::always_inline]] inline void widen_bf16_body(const BFloat16* __restrict src, int64_t n,
                                                   float* __restrict dst) {
  using V = typename Native<kIsa>::F;
  constexpr int W = kLanes<V>;
  int64_t i = 0;
  for (; i + W <= n; i += W) store(dst + i, load_bf16<V>(src + i));
  for (; i < n; ++i) dst[i] = bf16_bits_to_f32(src[i].bits);
}

template <CpuIsa kIsa>
[[gnu::always_inline]] inline void round_to_bf16_body(const float* __restrict src, int64_t n,
                                                      BFloat16* __restrict dst) {
  using V = typename Native<kIsa>::F;
  constexpr int W = kLanes<V>;
  int64_t i = 0;
  for (; i + W <= n; i += W) store_bf16(dst + i, load<V>(src + i));
  for (; i < n; ++i) dst[i] = BFloat16(src[i]);
}

}  // namespace

FITGRAD_ISA_KERNEL(void, widen_bf16, (const BFloat16* src, int64_t n, float* dst), (src, n, dst))
FITGRAD_ISA_KERNEL(void, round_to_bf16, (const float* src, int64_t n, BFloat16* dst), (src, n, dst))

}  // namespace fitgrad::cpu
