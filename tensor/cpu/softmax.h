// fp32 CPU kernels of softmax and log_softmax over one dim, forward and backward. The
// front-end (tensor/ops/softmax.h) views its contiguous input as (outer, n, inner) with
// the reduced dim in the middle; a row is the n elements at stride `inner`. Rows run in
// parallel, each reduced sequentially, so results are bitwise reproducible.
#pragma once

#include <cstdint>

namespace fitgrad::cpu {

// y = softmax(x) (or log_softmax when `log`) along the middle dim.
void softmax_f32(const float* x,  // (outer, n, inner)
                 float* y,        // (outer, n, inner)
                 int64_t outer, int64_t n, int64_t inner, bool log);

// softmax:     dx = y * (dy - sum(dy * y))
// log_softmax: dx = dy - exp(y) * sum(dy)   (y is the log_softmax output)
void softmax_backward_f32(const float* dy,  // (outer, n, inner)
                          const float* y,   // (outer, n, inner)
                          float* dx,        // (outer, n, inner)
                          int64_t outer, int64_t n, int64_t inner, bool log);

}  // namespace fitgrad::cpu
