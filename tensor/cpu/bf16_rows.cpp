// bf16 <-> f32 runs (see bf16_rows.h). A bf16 value is the high half of an f32's bits, so
// widening is a zero extension and a shift; rounding adds 0x7FFF plus the kept part's lowest
// bit before the shift (round to nearest, ties to even), and a NaN keeps its high half with
// the quiet bit set, as f32_to_bf16_bits does.
#include "tensor/cpu/bf16_rows.h"

#include <bit>
#include <cstring>

#include "tensor/cpu/vec.h"

namespace fitgrad::cpu {
namespace {

// The level's vector of W halves and of W unsigned words.
template <CpuIsa kIsa>
struct Words {
  static constexpr int W = kLanes<typename Native<kIsa>::F>;
  using H [[gnu::vector_size(2 * W)]] = uint16_t;
  using U [[gnu::vector_size(4 * W)]] = uint32_t;
};

template <CpuIsa kIsa>
[[gnu::always_inline]] inline void widen_bf16_body(const BFloat16* __restrict src, int64_t n,
                                                   float* __restrict dst) {
  using H = typename Words<kIsa>::H;
  using U = typename Words<kIsa>::U;
  constexpr int W = Words<kIsa>::W;
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    H h;
    std::memcpy(&h, src + i, sizeof h);
    const U bits = __builtin_convertvector(h, U) << 16;
    std::memcpy(dst + i, &bits, sizeof bits);
  }
  for (; i < n; ++i) dst[i] = bf16_bits_to_f32(src[i].bits);
}

template <CpuIsa kIsa>
[[gnu::always_inline]] inline void round_to_bf16_body(const float* __restrict src, int64_t n,
                                                      BFloat16* __restrict dst) {
  using H = typename Words<kIsa>::H;
  using U = typename Words<kIsa>::U;
  constexpr int W = Words<kIsa>::W;
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    U x;
    std::memcpy(&x, src + i, sizeof x);
    const U rounded = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
    const U bits = (x & 0x7FFFFFFFu) > 0x7F800000u ? ((x >> 16) | 0x0040u) : rounded;
    const H h = __builtin_convertvector(bits, H);
    std::memcpy(static_cast<void*>(dst + i), &h, sizeof h);
  }
  for (; i < n; ++i) dst[i] = BFloat16(src[i]);
}

}  // namespace

FITGRAD_ISA_KERNEL(void, widen_bf16, (const BFloat16* src, int64_t n, float* dst), (src, n, dst))
FITGRAD_ISA_KERNEL(void, round_to_bf16, (const float* src, int64_t n, BFloat16* dst), (src, n, dst))

}  // namespace fitgrad::cpu
