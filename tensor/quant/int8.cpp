// Q-GaLore's int8 group quantization on the CPU (see int8.h): one pass per group for its
// min and max, one for its codes.
#include "tensor/quant/int8.h"

#include "tensor/error.h"
#include "tensor/half.h"
#include "tensor/random/philox.h"

namespace fitgrad::quant {

void check_int8_group_size(int64_t n, int64_t group_size, const char* what) {
  FG_CHECK(group_size >= 1 && n % group_size == 0,
           "[{}] --weight_group_size {} must be >= 1 and divide the weight's {} values", what,
           group_size, n);
}

template <class E>
void quantize_int8(const E* a, int64_t n, int64_t group_size, uint8_t* codes, float* scales,
                   uint8_t* zeros, bool stochastic, uint64_t seed, uint64_t offset) {
  for (int64_t g = 0; g * group_size < n; ++g) {
    const int64_t begin = g * group_size, end = begin + group_size;
    float lo = INFINITY, hi = -INFINITY;
    for (int64_t i = begin; i < end; ++i) {
      lo = fminf(lo, float(a[i]));
      hi = fmaxf(hi, float(a[i]));
    }
    const float scale = int8_scale(lo, hi), zero = int8_zero(lo, scale);
    scales[g] = scale;
    zeros[g] = uint8_t(zero);
    for (int64_t i = begin; i < end; ++i)
      codes[i] = stochastic ? int8_code_stochastic(float(a[i]), scale, zero,
                                                   philox_uniform(seed, offset + uint64_t(i)))
                            : int8_code_nearest(float(a[i]), scale, zero);
  }
}

template <class E>
void dequantize_int8(const uint8_t* codes, const float* scales, const uint8_t* zeros, int64_t n,
                     int64_t group_size, E* out) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = E(int8_value(codes[i], zeros[i / group_size], scales[i / group_size]));
}

#define FITGRAD_INT8_INSTANTIATE(E)                                                                \
  template void quantize_int8<E>(const E*, int64_t, int64_t, uint8_t*, float*, uint8_t*, bool,     \
                                 uint64_t, uint64_t);                                              \
  template void dequantize_int8<E>(const uint8_t*, const float*, const uint8_t*, int64_t, int64_t, \
                                   E*);
FITGRAD_INT8_INSTANTIATE(float)
FITGRAD_INT8_INSTANTIATE(BFloat16)
FITGRAD_INT8_INSTANTIATE(Half)
#undef FITGRAD_INT8_INSTANTIATE

}  // namespace fitgrad::quant
