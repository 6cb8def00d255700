// Softmax kernels (see softmax.h). Numerically stable: the row maximum is subtracted
// before exp, so exp never overflows and the largest term is exactly 1.
#include "tensor/cpu/softmax.h"

#include <cmath>
#include <limits>

namespace fitgrad::cpu {

void softmax_f32(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, bool log) {
  const int64_t rows = outer * inner;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = (r / inner) * n * inner + r % inner;
    const float* xr = x + base;
    float* yr = y + base;
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) max = std::fmax(max, xr[i * inner]);
    float sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float e = std::exp(xr[i * inner] - max);
      if (!log) yr[i * inner] = e;
      sum += e;
    }
    if (log) {
      // (x - max) - log(sum), not x - (max + log(sum)): max + log(sum) would round to the
      // spacing of max, which for large logits is coarser than the result needs.
      const float log_sum = std::log(sum);
      for (int64_t i = 0; i < n; ++i) yr[i * inner] = (xr[i * inner] - max) - log_sum;
    } else {
      const float inv = 1.0f / sum;
      for (int64_t i = 0; i < n; ++i) yr[i * inner] *= inv;
    }
  }
}

void softmax_backward_f32(const float* dy, const float* y, float* dx, int64_t outer, int64_t n,
                          int64_t inner, bool log) {
  const int64_t rows = outer * inner;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = (r / inner) * n * inner + r % inner;
    const float* dyr = dy + base;
    const float* yr = y + base;
    float* dxr = dx + base;
    float sum = 0;
    if (log) {
      for (int64_t i = 0; i < n; ++i) sum += dyr[i * inner];
      for (int64_t i = 0; i < n; ++i)
        dxr[i * inner] = dyr[i * inner] - std::exp(yr[i * inner]) * sum;
    } else {
      for (int64_t i = 0; i < n; ++i) sum += dyr[i * inner] * yr[i * inner];
      for (int64_t i = 0; i < n; ++i) dxr[i * inner] = yr[i * inner] * (dyr[i * inner] - sum);
    }
  }
}

}  // namespace fitgrad::cpu
