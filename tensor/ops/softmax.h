// Softmax and log_softmax over any dim: raw front-ends (no autograd) and their backward
// functions. Inputs are f32, f16 or bf16 and results keep the input dtype; the kernels
// compute in f32 (Note [Op dtypes and devices]). Numerically stable: the maximum along
// `dim` is subtracted before exponentiating.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace fitgrad::ops {

// y = exp(x) / sum(exp(x)) along `dim` (negative dims count from the end).
Tensor softmax(const Tensor& x, int64_t dim);

// Note [Causal softmax]
// Attention's scores (..., T, S) under a causal mask, with the mask implicit: query i (the
// second-to-last index) sees keys j <= i + S - T (aligned to the end, as the flash kernels
// and Hugging Face's mask align them), and y is 0 at the keys it does not see. Equal bit for
// bit to softmax(x + mask) with an additive mask of 0 and -inf, without building the (T, S)
// mask on the host and copying it to the device for every layer. The backward is
// softmax_backward's: y is 0 where masked, so is dx. Needs T <= S (every query sees a key).
Tensor causal_softmax(const Tensor& x);  // (..., T, S)
// dx = y * (dy - sum(dy * y)) along `dim`; y is softmax's output. dx has y's dtype.
Tensor softmax_backward(const Tensor& dy, const Tensor& y, int64_t dim);

// y = x - log(sum(exp(x))) along `dim`.
Tensor log_softmax(const Tensor& x, int64_t dim);
// dx = dy - exp(y) * sum(dy) along `dim`; y is log_softmax's output. dx has y's dtype.
Tensor log_softmax_backward(const Tensor& dy, const Tensor& y, int64_t dim);

}  // namespace fitgrad::ops
