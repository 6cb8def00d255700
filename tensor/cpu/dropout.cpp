// Dropout kernel (see dropout.h).
#include "tensor/cpu/dropout.h"

#include "tensor/convert.h"
#include "tensor/random/dropout_mask.h"

namespace fitgrad::cpu {

template <class T>
void dropout(const T* x, T* y, int64_t n, double p, uint64_t seed, uint64_t offset) {
  const float scale = dropout_scale(p);
  philox_for_each_uniform(seed, offset, n, [&](int64_t i, float u) {
    y[i] = convert<T>(dropout_keeps(u, p) ? convert<float>(x[i]) * scale : 0.0f);
  });
}

template void dropout(const float*, float*, int64_t, double, uint64_t, uint64_t);
template void dropout(const BFloat16*, BFloat16*, int64_t, double, uint64_t, uint64_t);
template void dropout(const Half*, Half*, int64_t, double, uint64_t, uint64_t);

}  // namespace fitgrad::cpu
