// The launchers of the optimizer kernels (cuda/kernels/optim.cu, apollo.cu): AdamW, SGD, Adam8bit
// (its 8-bit and 32-bit kernels), Adafactor, APOLLO, the sum of squares and the in-place scale. As
// in launch.h, parameters are plain values, pointers (device memory unless said otherwise) and the
// stream; each returns the first failing launch's cudaError_t, and launches nothing for no
// elements. The constants are the fields of tensor/backend/kernel_args.h's scalar structs, which a
// .cu file cannot include (Note [No fmt in .cu files]); the adapters in cuda/ops/optim.cpp copy
// them over.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tensor/dtype.h"

namespace fitgrad::cuda {

// A parameter update's operands: param (n) and grad (n), contiguous, each f32, bf16 or f16;
// the new values are computed in f32 and rounded back to param's dtype, to nearest even or,
// for a bf16 parameter when `stochastic`, with element i taking Philox draw offset + i of
// seed (Note [Stochastic rounding] in tensor/cpu/param_store.h).
struct UpdateOperands {
  void* param = nullptr;
  DType param_dtype = DType::f32;
  const void* grad = nullptr;
  DType grad_dtype = DType::f32;
  int64_t n = 0;
  bool stochastic = false;
  uint64_t seed = 0, offset = 0;
};

// backend::AdamWScalars.
struct AdamWConstants {
  float decay, beta1, one_minus_beta1, beta2, one_minus_beta2, bias_correction2_sqrt, eps,
      neg_step_size;
};
// exp_avg, exp_avg_sq: f32 (n).
cudaError_t launch_adamw(const AdamWConstants& k, const UpdateOperands& u, float* exp_avg,
                         float* exp_avg_sq, cudaStream_t stream);

// backend::SgdScalars.
struct SgdConstants {
  float lr, weight_decay, momentum, one_minus_dampening;
  bool nesterov, first;
};
// momentum_buffer: f32 (n), or null without momentum.
cudaError_t launch_sgd(const SgdConstants& k, const UpdateOperands& u, float* momentum_buffer,
                       cudaStream_t stream);

// backend::Adam8bitScalars.
struct Adam8bitConstants {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, eps_c2, decay;
  bool weight_decay;
};
// The 8-bit kernel: state1, state2 u8 (n) codes of the signed and unsigned dynamic maps
// (signed_map, unsigned_map: 256 floats each, host memory, copied into the launch), absmax1,
// absmax2 f32 (ceil(n / 256)).
cudaError_t launch_adam8bit_blockwise(const Adam8bitConstants& k, const UpdateOperands& u,
                                      uint8_t* state1, uint8_t* state2, float* absmax1,
                                      float* absmax2, const float* signed_map,
                                      const float* unsigned_map, cudaStream_t stream);
// The 32-bit kernel: state1, state2 f32 (n).
cudaError_t launch_adam8bit_32bit(const Adam8bitConstants& k, const UpdateOperands& u,
                                  float* state1, float* state2, cudaStream_t stream);

// backend::AdafactorScalars (`torch` for AdafactorVariant::torch, else hf).
struct AdafactorConstants {
  bool torch;
  double rho, eps2, d;
  float eps1, decay, one_minus_beta2;
  double rel_step, eps_scale, clip_threshold, weight_decay;
  float beta2t, eps0, beta1;
  bool scale_parameter;
};
// The parameter viewed as (batch, rows, cols), u.n = batch * rows * cols >= 1: row f32
// (batch * rows) and col f32 (batch * cols) factors, or full f32 (n) with (1, 1, n);
// exp_avg f32 (n) or null; workspace: backend::adafactor_workspace_doubles(batch, rows,
// cols) doubles (Note [Adafactor's workspace on the device]).
cudaError_t launch_adafactor(const AdafactorConstants& k, const UpdateOperands& u, float* row,
                             float* col, float* full, float* exp_avg, int64_t batch, int64_t rows,
                             int64_t cols, double* workspace, cudaStream_t stream);

// backend::ApolloScalars.
struct ApolloConstants {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
  double step, growth;
  float decay;
  bool weight_decay, right, tensor_wise, first;
};
// The (rows, cols) parameter's update from its projected gradient low, (rows, rank) when
// k.right else (rank, cols), in the gradient's dtype (u.grad_dtype); exp_avg, exp_avg_sq f32
// like low; norm one f32; workspace backend::apollo_workspace(rows, cols, k.right).doubles
// doubles (Note [APOLLO's workspace]). u.n = rows * cols >= 1, rank >= 1.
cudaError_t launch_apollo(const ApolloConstants& k, const UpdateOperands& u, const void* low,
                          int64_t rows, int64_t cols, int64_t rank, float* exp_avg,
                          float* exp_avg_sq, float* norm, double* workspace, cudaStream_t stream);

// *acc (device memory) += the sum of double(x[i])^2 over x (n), `dtype` f32, bf16 or f16:
// `blocks` partials (backend::cuda_sum_squares_blocks, >= 1) in workspace[0, blocks), then
// added in block order into *acc.
cudaError_t launch_sum_squares(const void* x, DType dtype, int64_t n, int64_t blocks,
                               double* workspace, double* acc, cudaStream_t stream);

// x (n) *= factor in f32, rounded back to x's dtype (f32, bf16 or f16). With clip_sum_squares
// (device memory) the factor is the clip coefficient of backend::ScaleInPlaceArgs, computed
// by each thread from it, and x is left as it is when the clip does not apply.
cudaError_t launch_scale_inplace(void* x, DType dtype, int64_t n, float factor,
                                 const double* clip_sum_squares, double max_norm,
                                 cudaStream_t stream);

}  // namespace fitgrad::cuda
