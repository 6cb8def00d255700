// CPU kernel of inverted dropout. The keep mask is never stored: it is recomputed from the
// Philox draws of the saved RngState (Note [Dropout keeps no mask] in tensor/ops/dropout.h),
// so the forward and the backward pass call this same kernel on x and on dy.
#pragma once

#include <cstdint>

namespace fitgrad::cpu {

// y[i] = x[i] / (1 - p) when the uniform of draw offset + i of `seed` is >= p, else 0.
void dropout_f32(const float* x,  // (n)
                 float* y,        // (n)
                 int64_t n, double p, uint64_t seed, uint64_t offset);

}  // namespace fitgrad::cpu
