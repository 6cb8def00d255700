// CPU kernels of the optimizers: one fused pass over each parameter (AdamW, SGD), and the
// squared-norm and scale passes of gradient clipping. Parameters and gradients may be f32,
// f16 or bf16 (each element converted to f32 to compute, the result rounded back); states
// are f32. All pointers are contiguous. See Note [Optimizer kernels] in optim_update.cpp.
#pragma once

#include <cstdint>

#include "tensor/backend/kernel_args.h"
#include "tensor/dtype.h"

namespace fitgrad::cpu {

using backend::AdamWScalars;
using backend::SgdScalars;

// AdamW as AdamWScalars gives it (tensor/backend/kernel_args.h).
// With stochastic rounding on (sr), a bf16 parameter is written as Note [Stochastic
// rounding] in param_store.h says.
void adamw_update(const AdamWScalars& s, void* param, DType param_dtype, const void* grad,
                  DType grad_dtype, float* exp_avg, float* exp_avg_sq, int64_t n,
                  const backend::StochasticRounding& sr);

// SGD as SgdScalars gives it; `momentum_buffer` is null when momentum is 0.
void sgd_update(const SgdScalars& s, void* param, DType param_dtype, const void* grad,
                DType grad_dtype, float* momentum_buffer, int64_t n,
                const backend::StochasticRounding& sr);

// The doubles of sum_squares' workspace for n elements: one partial sum per chunk.
int64_t sum_squares_workspace_doubles(int64_t n);

// The sum of squares of `n` elements, accumulated in double in a fixed order (fixed
// chunks, summed in chunk order), so the result does not depend on the thread count.
// partial holds sum_squares_workspace_doubles(n) doubles.
double sum_squares(const void* x, DType dtype, int64_t n, double* partial);
// x *= scale, in f32, rounded back to the dtype.
void scale_inplace(void* x, DType dtype, int64_t n, float scale);

}  // namespace fitgrad::cpu
