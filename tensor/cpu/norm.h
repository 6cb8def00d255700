// CPU kernels of layer_norm and rms_norm over the last dim, forward and backward. The
// front-end (tensor/ops/norm.h) hands contiguous (rows, C) buffers. E (float, BFloat16 or
// Half) is the storage type of x, w, b, y, dy and dx: elements are widened to f32, rows are
// computed in f32, and each result is rounded once into E; the statistics (mean, rstd), the
// weight gradients and their partials are f32. Rows run in parallel;
// every row and every weight-gradient column is reduced in a fixed order, so results are
// bitwise reproducible for a fixed thread count (Note [Deterministic weight gradients]).
#pragma once

#include <cstdint>

#include "tensor/half.h"

namespace fitgrad::cpu {

// The backward kernels reduce weight gradients over P row partitions, one per thread of the
// target (backend::norm_partitions). The front-end allocates the partials scratch, of shape
// (P, 2 * C) for layer norm and (P, C) for RMS norm, and passes P to the backward kernel.

// y = (x - mean) * rstd * w + b, rstd = 1 / sqrt(var + eps) with the biased variance.
// w and b may be null (1 and 0).
template <class E>
void layer_norm(const E* x,   // (rows, C)
                const E* w,   // (C) or null
                const E* b,   // (C) or null
                E* y,         // (rows, C)
                float* mean,  // (rows)
                float* rstd,  // (rows)
                int64_t rows, int64_t C, float eps);

// dx, and when dw/db are non-null dw = sum_rows dy * xhat, db = sum_rows dy. `partials`
// is scratch of (P, 2 * C) floats, read only when dw or db is non-null.
template <class E>
void layer_norm_backward(const E* dy,        // (rows, C)
                         const E* x,         // (rows, C)
                         const E* w,         // (C) or null
                         const float* mean,  // (rows)
                         const float* rstd,  // (rows)
                         E* dx,              // (rows, C)
                         float* dw,          // (C) or null
                         float* db,          // (C) or null
                         float* partials,    // (P, 2 * C) scratch
                         int64_t P, int64_t rows, int64_t C);

// y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps); w may be null.
template <class E>
void rms_norm(const E* x,   // (rows, C)
              const E* w,   // (C) or null
              E* y,         // (rows, C)
              float* rstd,  // (rows)
              int64_t rows, int64_t C, float eps);

// dx, and when dw is non-null dw = sum_rows dy * x * rstd (partials as above).
template <class E>
void rms_norm_backward(const E* dy,        // (rows, C)
                       const E* x,         // (rows, C)
                       const E* w,         // (C) or null
                       const float* rstd,  // (rows)
                       E* dx,              // (rows, C)
                       float* dw,          // (C) or null
                       float* partials,    // (P, C) scratch
                       int64_t P, int64_t rows, int64_t C);

}  // namespace fitgrad::cpu
