// Dropout kernel (see dropout.h).
#include "tensor/cpu/dropout.h"

#include "tensor/random/philox.h"

namespace fitgrad::cpu {

void dropout_f32(const float* x, float* y, int64_t n, double p, uint64_t seed, uint64_t offset) {
  const float scale = float(1.0 / (1.0 - p));
  philox_for_each_uniform(seed, offset, n,
                          [&](int64_t i, float u) { y[i] = double(u) >= p ? x[i] * scale : 0.0f; });
}

}  // namespace fitgrad::cpu
