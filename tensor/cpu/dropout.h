// CPU kernel of inverted dropout. The keep mask is never stored: it is recomputed from the
// Philox draws of the saved RngState (Note [Dropout keeps no mask] in tensor/ops/dropout.h),
// so the forward and the backward pass call this same kernel on x and on dy.
#pragma once

#include <cstdint>

#include "tensor/half.h"

namespace fitgrad::cpu {

// y[i] = x[i] / (1 - p) when the uniform of draw offset + i of `seed` is >= p, else 0; T is
// float, BFloat16 or Half, computed in f32 and rounded once into T.
template <class T>
void dropout(const T* x,  // (n)
             T* y,        // (n)
             int64_t n, double p, uint64_t seed, uint64_t offset);
extern template void dropout(const float*, float*, int64_t, double, uint64_t, uint64_t);
extern template void dropout(const BFloat16*, BFloat16*, int64_t, double, uint64_t, uint64_t);
extern template void dropout(const Half*, Half*, int64_t, double, uint64_t, uint64_t);

}  // namespace fitgrad::cpu
