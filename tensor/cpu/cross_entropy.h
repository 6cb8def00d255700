// CPU kernels of the fused cross-entropy (tensor/ops/cross_entropy.cpp): per-row
// log-sum-exp, the summed negative log-likelihood, and the logits gradient, each over one
// chunk of rows of logits (rows, v), contiguous, f32 or bf16. bf16 rows are widened in
// registers and a bf16 gradient is rounded once from the f32 value the f32 kernel would
// store, so a bf16 call gives bitwise the results of the f32 call on the widened logits
// followed by one rounding (Note [Cross-entropy on bf16 rows] in cross_entropy.cpp). The
// front-end walks the chunks and owns the f32 staging of other logits; targets arrive as
// i64 already checked to be in [0, v) or equal to ignore_index.
#pragma once

#include <cstdint>

#include "tensor/half.h"

namespace fitgrad::cpu {

// lse(rows) = log(sum_c exp(x[r][c])) of x (rows, v), rows in parallel.
void cross_entropy_lse(int64_t rows, int64_t v, const float* x, float* lse);
void cross_entropy_lse(int64_t rows, int64_t v, const BFloat16* x, float* lse);

// sum over rows with targets[r] != ignore_index of lse[r] - x[r][targets[r]], accumulated
// in double in row order (so the same for any thread count and any chunking).
double cross_entropy_nll_sum(int64_t rows, int64_t v, const float* x, const float* lse,
                             const int64_t* targets, int64_t ignore_index);
double cross_entropy_nll_sum(int64_t rows, int64_t v, const BFloat16* x, const float* lse,
                             const int64_t* targets, int64_t ignore_index);

// dx (rows, v) = g * (exp(x - lse) - onehot(target)) per row, all zero for an ignored row.
// dx may be x (in place) in the f32 form.
void cross_entropy_grad(int64_t rows, int64_t v, const float* x, const float* lse,
                        const int64_t* targets, int64_t ignore_index, float g, float* dx);
void cross_entropy_grad(int64_t rows, int64_t v, const BFloat16* x, const float* lse,
                        const int64_t* targets, int64_t ignore_index, float g, BFloat16* dx);

}  // namespace fitgrad::cpu
