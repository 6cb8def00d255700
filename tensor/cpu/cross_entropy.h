// CPU kernels of the fused cross-entropy (tensor/ops/cross_entropy.cpp): per-row
// log-sum-exp, the summed negative log-likelihood, and the logits gradient, each over one
// chunk of rows of fp32 logits (rows, v), contiguous. The front-end walks the chunks and
// owns the fp32 staging of non-f32 logits; targets arrive as i64 already checked to be in
// [0, v) or equal to ignore_index.
#pragma once

#include <cstdint>

namespace fitgrad::cpu {

// lse(rows) = log(sum_c exp(x[r][c])) of x (rows, v), rows in parallel.
void cross_entropy_lse(int64_t rows, int64_t v, const float* x, float* lse);

// sum over rows with targets[r] != ignore_index of lse[r] - x[r][targets[r]], accumulated
// in double in row order (so the same for any thread count and any chunking).
double cross_entropy_nll_sum(int64_t rows, int64_t v, const float* x, const float* lse,
                             const int64_t* targets, int64_t ignore_index);

// dx (rows, v) = g * (exp(x - lse) - onehot(target)) per row, all zero for an ignored row.
// dx may be x (in place).
void cross_entropy_grad(int64_t rows, int64_t v, const float* x, const float* lse,
                        const int64_t* targets, int64_t ignore_index, float g, float* dx);

}  // namespace fitgrad::cpu
