// fp32 CPU kernels of layer_norm and rms_norm over the last dim, forward and backward. The
// front-end (tensor/ops/norm.h) hands contiguous (rows, C) buffers. Rows run in parallel;
// every row and every weight-gradient column is reduced in a fixed order, so results are
// bitwise reproducible for a fixed thread count (Note [Deterministic weight gradients]).
#pragma once

#include <cstdint>

namespace fitgrad::cpu {

// The backward kernels reduce weight gradients over P row partitions, one per thread of the
// target (backend::norm_partitions). The front-end allocates the partials scratch, of shape
// (P, 2 * C) for layer norm and (P, C) for RMS norm, and passes P to the backward kernel.

// y = (x - mean) * rstd * w + b, rstd = 1 / sqrt(var + eps) with the biased variance.
// w and b may be null (1 and 0).
void layer_norm_f32(const float* x,  // (rows, C)
                    const float* w,  // (C) or null
                    const float* b,  // (C) or null
                    float* y,        // (rows, C)
                    float* mean,     // (rows)
                    float* rstd,     // (rows)
                    int64_t rows, int64_t C, float eps);

// dx, and when dw/db are non-null dw = sum_rows dy * xhat, db = sum_rows dy. `partials`
// is scratch of (P, 2 * C) floats, read only when dw or db is non-null.
void layer_norm_backward_f32(const float* dy,    // (rows, C)
                             const float* x,     // (rows, C)
                             const float* w,     // (C) or null
                             const float* mean,  // (rows)
                             const float* rstd,  // (rows)
                             float* dx,          // (rows, C)
                             float* dw,          // (C) or null
                             float* db,          // (C) or null
                             float* partials,    // (P, 2 * C) scratch
                             int64_t P, int64_t rows, int64_t C);

// y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps); w may be null.
void rms_norm_f32(const float* x,  // (rows, C)
                  const float* w,  // (C) or null
                  float* y,        // (rows, C)
                  float* rstd,     // (rows)
                  int64_t rows, int64_t C, float eps);

// dx, and when dw is non-null dw = sum_rows dy * x * rstd (partials as above).
void rms_norm_backward_f32(const float* dy,    // (rows, C)
                           const float* x,     // (rows, C)
                           const float* w,     // (C) or null
                           const float* rstd,  // (rows)
                           float* dx,          // (rows, C)
                           float* dw,          // (C) or null
                           float* partials,    // (P, C) scratch
                           int64_t P, int64_t rows, int64_t C);

}  // namespace fitgrad::cpu
