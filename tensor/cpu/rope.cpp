// Rotary embedding kernels (see rope.h).
#include "tensor/cpu/rope.h"

#include <cmath>
#include <vector>

#include "tensor/convert.h"

namespace fitgrad::cpu {

void rope_table_f32(float* table, int64_t T, int64_t D, int64_t position_offset, double theta) {
  const int64_t half = D / 2;
  std::vector<double> inv_freq(static_cast<size_t>(half));  // theta^(-2i/D), the same for every position
  for (int64_t i = 0; i < half; ++i) inv_freq[i] = std::pow(theta, -double(2 * i) / double(D));
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = double(position_offset + t) * inv_freq[i];
      table[t * half + i] = float(std::cos(angle));
      table[(T + t) * half + i] = float(std::sin(angle));
    }
  }
}

template <class E>
void rope(const E* x, const float* table, E* y, int64_t BH, int64_t T, int64_t D, bool inverse) {
  const int64_t half = D / 2;
  const float sign = inverse ? -1.0f : 1.0f;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < BH * T; ++r) {
    const int64_t t = r % T;
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

template void rope(const float*, const float*, float*, int64_t, int64_t, int64_t, bool);
template void rope(const BFloat16*, const float*, BFloat16*, int64_t, int64_t, int64_t, bool);
template void rope(const Half*, const float*, Half*, int64_t, int64_t, int64_t, bool);

}  // namespace fitgrad::cpu
