// Rotary embedding kernels (see rope.h).
#include "tensor/cpu/rope.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tensor/convert.h"

namespace fitgrad::cpu {

// Note [RoPE table by rotation]
// The table needs cos and sin of T x D/2 angles; libm's sincos for each took 4% of a bf16
// SmolLM2 evaluation (32 x 512 of them per attention layer; bench/RESULTS.md, issue 45). The
// positions go in fixed blocks of kRopeBlock: a block's first angle is evaluated directly and
// each later one is the previous rotated by the frequency's step, cos(a + w) = cos a cos w -
// sin a sin w (and likewise sin), in double. At most kRopeBlock - 1 rotations leave an error
// near 1e-14, far below the f32 the table is rounded to, and the blocks are fixed, so the
// values do not depend on the thread count.
constexpr int64_t kRopeBlock = 32;

void rope_table_f32(float* table, int64_t T, int64_t D, int64_t position_offset,
                    const RopeParams& rope) {
  const int64_t half = D / 2;
  std::vector<double> inv_freq(static_cast<size_t>(half)), cos_w(inv_freq), sin_w(inv_freq);
  for (int64_t i = 0; i < half; ++i) {
    inv_freq[i] = rope_frequency(i, D, rope);  // Note [RoPE frequencies]
    cos_w[i] = std::cos(inv_freq[i]);
    sin_w[i] = std::sin(inv_freq[i]);
  }
  const double scale = rope_attention_factor(rope);
  const int64_t blocks = (T + kRopeBlock - 1) / kRopeBlock;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t t0 = b * kRopeBlock, t1 = std::min(T, t0 + kRopeBlock);
    for (int64_t i = 0; i < half; ++i) {
      const double angle = double(position_offset + t0) * inv_freq[i];
      double c = std::cos(angle), sn = std::sin(angle);
      for (int64_t t = t0; t < t1; ++t) {
        table[t * half + i] = float(c * scale);
        table[(T + t) * half + i] = float(sn * scale);
        const double next_c = c * cos_w[i] - sn * sin_w[i];
        sn = sn * cos_w[i] + c * sin_w[i];
        c = next_c;
      }
    }
  }
}

template <class E>
void rope(const E* x, const float* table, E* y, int64_t BH, int64_t T, int64_t D, bool inverse,
          const int32_t* positions, int64_t H) {
  const int64_t half = D / 2;
  const float sign = inverse ? -1.0f : 1.0f;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < BH * T; ++r) {
    const int64_t t = positions ? positions[r / (H * T) * T + r % T] : r % T;
    const float* cos = table + t * half;
    const float* sin = table + (T + t) * half;
    const E* xr = x + r * D;
    E* yr = y + r * D;
    for (int64_t i = 0; i < half; ++i) {
      const float a = convert<float>(xr[i]), b = convert<float>(xr[i + half]), s = sign * sin[i];
      yr[i] = convert<E>(a * cos[i] - b * s);
      yr[i + half] = convert<E>(b * cos[i] + a * s);
    }
  }
}

#define FITGRAD_ROPE(E)                                                                           \
  template void rope(const E*, const float*, E*, int64_t, int64_t, int64_t, bool, const int32_t*, \
                     int64_t);
FITGRAD_ROPE(float)
FITGRAD_ROPE(BFloat16)
FITGRAD_ROPE(Half)
#undef FITGRAD_ROPE

}  // namespace fitgrad::cpu
