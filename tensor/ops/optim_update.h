// Front-ends of the fused optimizer kernels (DESIGN.md, Ops: optim/ reaches kernels only through
// ops): one pass over a parameter for AdamW and SGD, a few for Adam8bit, Adafactor and APOLLO, and
// the squared norm and the in-place scale of gradient clipping. Each checks its tensors and
// dispatches once; the scalars are those of tensor/backend/kernel_args.h, computed by optim/.
#pragma once

#include "tensor/backend/kernel_args.h"
#include "tensor/tensor.h"

namespace fitgrad::ops {

// param and grad (any floating dtype) and the f32 states: one shape, one device, all
// contiguous. Updates param, exp_avg and exp_avg_sq in place.
void adamw_update_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                   const Tensor& exp_avg_sq, const backend::AdamWScalars& scalars,
                   const backend::StochasticRounding& sr = {});
// bitsandbytes' blockwise 8-bit Adam: state1/state2 u8 (numel) codes with f32 absmax1/absmax2
// (ceil(numel / 256)), or f32 states shaped as param and undefined absmaxes (its 32-bit
// kernel). Updates param and the states in place.
void adam8bit_update_(const Tensor& param, const Tensor& grad, const Tensor& state1,
                      const Tensor& state2, const Tensor& absmax1, const Tensor& absmax2,
                      const backend::Adam8bitScalars& scalars,
                      const backend::StochasticRounding& sr = {});
// Adafactor (tensor/cpu/adafactor.h): a factored parameter (>= 2 dims) has f32 row (its
// numel / last dim) and col (numel / second-to-last dim) factors and an undefined full; any
// other has an f32 full second moment of its numel; exp_avg is f32 like param or undefined.
void adafactor_update_(const Tensor& param, const Tensor& grad, const Tensor& row,
                       const Tensor& col, const Tensor& full, const Tensor& exp_avg,
                       const backend::AdafactorScalars& scalars,
                       const backend::StochasticRounding& sr = {});
// APOLLO (backend::ApolloArgs): param and grad (rows, cols); low, the gradient projected on
// the rank side given by scalars.right, (rows, rank) or (rank, cols) in grad's dtype;
// exp_avg and exp_avg_sq f32 shaped as low; norm one f32, the limiter's state. Updates
// param, the moments and norm in place.
void apollo_update_(const Tensor& param, const Tensor& grad, const Tensor& low,
                    const Tensor& exp_avg, const Tensor& exp_avg_sq, const Tensor& norm,
                    const backend::ApolloScalars& scalars,
                    const backend::StochasticRounding& sr = {});
// momentum_buffer: f32 like param, or undefined when momentum is 0.
void sgd_update_(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                 const backend::SgdScalars& scalars, const backend::StochasticRounding& sr = {});

// `doubles` doubles on `device`, zero: tensors have no f64, so the storage is an f32 tensor
// of twice the count, allocated under the current memory category. The accumulator of
// sum_squares_add_; narrow(0, 2 i, 2) is double i.
Tensor zero_doubles(int64_t doubles, Device device);
// Double i of such a tensor, on the host: a host read (Note [Host reads] in
// tensor/host_reads.h); 0 on meta.
double read_double(const Tensor& doubles, int64_t i = 0);
// acc (one double of zero_doubles' kind, on x's device) += sum(x^2) of a contiguous floating
// tensor, accumulated in double in a fixed order, on the device: no host read.
void sum_squares_add_(const Tensor& x, const Tensor& acc);
// sum(x^2) on the host: sum_squares_add_ into a fresh double, then one host read; 0 on a
// device without bytes (meta).
double sum_squares(const Tensor& x);
// x *= factor in place (a contiguous floating tensor), computed in f32.
void scale_(const Tensor& x, float factor);
// Gradient clipping's scale, decided on the device: x *= max_norm / (sqrt(*sum_sq) + 1e-6)
// when that is below 1 and the norm is finite, else x is left as it is. sum_sq is one double
// of zero_doubles' kind on x's device (ScaleInPlaceArgs in kernel_args.h).
void clip_scale_(const Tensor& x, const Tensor& sum_sq, double max_norm);

}  // namespace fitgrad::ops
