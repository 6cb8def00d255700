// CPU kernels of softmax and log_softmax over one dim, forward and backward. The front-end
// (tensor/ops/softmax.h) views its contiguous input as (outer, n, inner) with the reduced
// dim in the middle; a row is the n elements at stride `inner`. Rows run in parallel, each
// reduced sequentially, so results are bitwise reproducible. E (float, BFloat16 or Half) is
// the storage type of every operand: elements are widened to f32, the row is computed in
// f32 and each result is rounded once into E.
#pragma once

#include <cstdint>

#include "tensor/half.h"

namespace fitgrad::cpu {

// y = softmax(x) (or log_softmax when `log`) along the middle dim. causal_t > 0 (softmax,
// inner 1): row r keeps its first (r % causal_t) + 1 + n - causal_t columns and the rest of
// y is 0 (backend::SoftmaxArgs).
template <class E>
void softmax(const E* x,  // (outer, n, inner)
             E* y,        // (outer, n, inner)
             int64_t outer, int64_t n, int64_t inner, bool log, int64_t causal_t = 0);

// dx from dy and the forward's output y: softmax dx = y * (dy - sum(dy * y)); log_softmax
// dx = dy - exp(y) * sum(dy).
template <class E>
void softmax_backward(const E* dy,  // (outer, n, inner)
                      const E* y,   // (outer, n, inner)
                      E* dx,        // (outer, n, inner)
                      int64_t outer, int64_t n, int64_t inner, bool log);

#define FITGRAD_SOFTMAX_EXTERN(E)                                                       \
  extern template void softmax(const E*, E*, int64_t, int64_t, int64_t, bool, int64_t); \
  extern template void softmax_backward(const E*, const E*, E*, int64_t, int64_t, int64_t, bool);
FITGRAD_SOFTMAX_EXTERN(float)
FITGRAD_SOFTMAX_EXTERN(BFloat16)
FITGRAD_SOFTMAX_EXTERN(Half)
#undef FITGRAD_SOFTMAX_EXTERN

}  // namespace fitgrad::cpu
