// Layer norm and RMS norm over the last dim: raw front-ends (no autograd) and their
// backward functions. x is f32, f16 or bf16 of shape (..., C) and y keeps x's dtype; the
// per-row statistics (mean, rstd) are f32 of shape (...) and are what backward needs
// (Note [Op dtypes and devices]). Weight gradients are reduced in a fixed order, so they
// are bitwise reproducible (Note [Deterministic weight gradients] in tensor/cpu/norm.cpp).
#pragma once

#include "tensor/tensor.h"

namespace fitgrad::ops {

struct LayerNormOut {
  Tensor y;     // (..., C), x's dtype
  Tensor mean;  // (...), f32
  Tensor rstd;  // (...), f32: 1 / sqrt(biased variance + eps)
};
// y = (x - mean) * rstd * weight + bias; weight and bias are (C) or undefined.
LayerNormOut layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);

struct LayerNormGrads {
  Tensor dx;       // (..., C), x's dtype
  Tensor dweight;  // (C), weight's dtype; undefined when weight is
  Tensor dbias;    // (C); undefined when !with_dbias
};
// The gradients of layer_norm for the upstream gradient dy (..., C), from the saved x,
// weight, mean and rstd. The bias itself is not needed: `with_dbias` says whether there was
// one. dbias has weight's dtype, or x's when there is no weight.
LayerNormGrads layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                   const Tensor& mean, const Tensor& rstd, bool with_dbias = true);

struct RmsNormOut {
  Tensor y;     // (..., C), x's dtype
  Tensor rstd;  // (...), f32: 1 / sqrt(mean(x^2) + eps)
};
// Llama's RMSNorm: y = x * rstd * weight; weight is (C) or undefined.
RmsNormOut rms_norm(const Tensor& x, const Tensor& weight, double eps);

struct RmsNormGrads {
  Tensor dx;       // (..., C), x's dtype
  Tensor dweight;  // (C), weight's dtype; undefined when weight is
};
RmsNormGrads rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                               const Tensor& rstd);

}  // namespace fitgrad::ops
