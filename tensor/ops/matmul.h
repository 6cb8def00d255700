// Matrix products: matmul with batch broadcasting and transpose flags, and linear.
// Both run on the fp32 GEMM in cpu/gemm.h and follow Note [Op dtypes and devices].
#pragma once

#include "tensor/tensor.h"

namespace fitgrad::ops {

// op(a) @ op(b) where op transposes the last two dims when its flag is set.
// a: (..., m, k), or (..., k, m) with trans_a; b: (..., k, n), or (..., n, k) with trans_b;
// the batch dims (...) broadcast. Both at least 2-d, same dtype. Result (batch..., m, n).
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);

// y = x @ weight^T + bias. x: (..., in); weight: (out, in); bias: (out) or undefined.
// Result (..., out).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

}  // namespace fitgrad::ops
