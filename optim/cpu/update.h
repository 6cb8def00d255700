// CPU kernels of the optimizers: one fused pass over each parameter (AdamW, SGD), and the
// squared-norm and scale passes of gradient clipping. Parameters and gradients may be f32,
// f16 or bf16 (each element converted to f32 to compute, the result rounded back); states
// are f32. All pointers are contiguous. See Note [Optimizer kernels] in update.cpp.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace fitgrad::optim::cpu {

// The per-step scalars of torch.optim.AdamW, already rounded to f32 as torch's f32 kernels
// round them. Per element:
//   p = p * decay                      (decay = 1 - lr * weight_decay)
//   m = m * beta1 + g * (1 - beta1)
//   v = v * beta2 + g * g * (1 - beta2)
//   p = p + neg_step_size * (m / (sqrt(v) / bias_correction2_sqrt + eps))
struct AdamWScalars {
  float decay, beta1, one_minus_beta1, beta2, one_minus_beta2, bias_correction2_sqrt, eps,
      neg_step_size;
};
void adamw_update(const AdamWScalars& s, void* param, DType param_dtype, const void* grad,
                  DType grad_dtype, float* exp_avg, float* exp_avg_sq, int64_t n);

// torch.optim.SGD per element, d = g + weight_decay * p, then with momentum
//   buf = first ? d : buf * momentum + d * (1 - dampening)
//   d = nesterov ? d + momentum * buf : buf
// and p = p - lr * d. `buf` is null when momentum is 0.
struct SgdScalars {
  float lr, weight_decay, momentum, one_minus_dampening;
  bool nesterov, first;
};
void sgd_update(const SgdScalars& s, void* param, DType param_dtype, const void* grad,
                DType grad_dtype, float* momentum_buffer, int64_t n);

// The sum of squares of `n` elements, accumulated in double in a fixed order (fixed
// chunks, summed in chunk order), so the result does not depend on the thread count.
double sum_squares(const void* x, DType dtype, int64_t n);
// x *= scale, in f32, rounded back to the dtype.
void scale_inplace(void* x, DType dtype, int64_t n, float scale);

}  // namespace fitgrad::optim::cpu
