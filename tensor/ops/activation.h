// Activation op front-ends (issue 3): gelu (tanh approximation), silu and the fused
// swiglu, each with a plain backward function that autograd/ wires in. Raw ops without
// autograd; f32, f16 or bf16 storage, computed in f32, returned in the input dtype
// (Note [Op dtypes and devices]). The operands of one call have equal shapes (no
// broadcasting) and may be any views. The formulas are in cpu/elementwise.h.
#pragma once

#include <utility>

#include "tensor/tensor.h"

namespace fitgrad::ops {

// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
Tensor gelu(const Tensor& x);
// dx = dy * gelu'(x); dy and x have one shape.
Tensor gelu_backward(const Tensor& dy, const Tensor& x);

// x * sigmoid(x).
Tensor silu(const Tensor& x);
Tensor silu_backward(const Tensor& dy, const Tensor& x);

// silu(gate) * up in one pass: the silu(gate) intermediate is never stored.
Tensor swiglu(const Tensor& gate, const Tensor& up);  // (..., F), (..., F) -> (..., F)
// (dgate, dup) = (dy * up * silu'(gate), dy * silu(gate)), in one pass.
std::pair<Tensor, Tensor> swiglu_backward(const Tensor& dy, const Tensor& gate, const Tensor& up);

}  // namespace fitgrad::ops
