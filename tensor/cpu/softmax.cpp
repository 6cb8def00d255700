// Softmax kernels (see softmax.h). Numerically stable: the row maximum is subtracted
// before exp, so exp never overflows and the largest term is exactly 1.
#include "tensor/cpu/softmax.h"

#include <cmath>
#include <limits>
#include <type_traits>

#include "tensor/convert.h"

namespace fitgrad::cpu {

// Note [Softmax in one rounding]
// An f32 output holds exp(x - max) and is then scaled in place, as before; any other output
// would round twice that way, so the row's exponentials are computed again in the last pass
// (the same f32 values, bit for bit) and each y = e / sum is rounded once.
// A causal row computes over its kept columns alone and writes 0 to the rest: the same
// values, bit for bit, as an additive mask of -inf would give, whose exponentials are 0.
template <class E>
void softmax(const E* x, E* y, int64_t outer, int64_t n_all, int64_t inner, bool log,
             int64_t causal_t) {
  const int64_t rows = outer * inner;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = (r / inner) * n_all * inner + r % inner;
    const E* xr = x + base;
    E* yr = y + base;
    const int64_t n = causal_t > 0 ? r % causal_t + 1 + n_all - causal_t : n_all;
    for (int64_t i = n; i < n_all; ++i) yr[i * inner] = convert<E>(0.0f);
    auto at = [&](int64_t i) { return convert<float>(xr[i * inner]); };
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) max = std::fmax(max, at(i));
    float sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float e = std::exp(at(i) - max);
      if constexpr (std::is_same_v<E, float>) {
        if (!log) yr[i * inner] = e;
      }
      sum += e;
    }
    if (log) {
      // (x - max) - log(sum), not x - (max + log(sum)): max + log(sum) would round to the
      // spacing of max, which for large logits is coarser than the result needs.
      const float log_sum = std::log(sum);
      for (int64_t i = 0; i < n; ++i) yr[i * inner] = convert<E>((at(i) - max) - log_sum);
    } else if constexpr (std::is_same_v<E, float>) {
      const float inv = 1.0f / sum;
      for (int64_t i = 0; i < n; ++i) yr[i * inner] *= inv;
    } else {  // Note [Softmax in one rounding]
      const float inv = 1.0f / sum;
      for (int64_t i = 0; i < n; ++i) yr[i * inner] = convert<E>(std::exp(at(i) - max) * inv);
    }
  }
}

template <class E>
void softmax_backward(const E* dy, const E* y, E* dx, int64_t outer, int64_t n, int64_t inner,
                      bool log) {
  const int64_t rows = outer * inner;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = (r / inner) * n * inner + r % inner;
    const E* dyr = dy + base;
    const E* yr = y + base;
    E* dxr = dx + base;
    auto g = [&](int64_t i) { return convert<float>(dyr[i * inner]); };
    auto v = [&](int64_t i) { return convert<float>(yr[i * inner]); };
    float sum = 0;
    if (log) {
      for (int64_t i = 0; i < n; ++i) sum += g(i);
      for (int64_t i = 0; i < n; ++i) dxr[i * inner] = convert<E>(g(i) - std::exp(v(i)) * sum);
    } else {
      for (int64_t i = 0; i < n; ++i) sum += g(i) * v(i);
      for (int64_t i = 0; i < n; ++i) dxr[i * inner] = convert<E>(v(i) * (g(i) - sum));
    }
  }
}

#define FITGRAD_SOFTMAX_INSTANTIATE(E)                                           \
  template void softmax(const E*, E*, int64_t, int64_t, int64_t, bool, int64_t); \
  template void softmax_backward(const E*, const E*, E*, int64_t, int64_t, int64_t, bool);
FITGRAD_SOFTMAX_INSTANTIATE(float)
FITGRAD_SOFTMAX_INSTANTIATE(BFloat16)
FITGRAD_SOFTMAX_INSTANTIATE(Half)
#undef FITGRAD_SOFTMAX_INSTANTIATE

}  // namespace fitgrad::cpu
