// The CPU elementwise kernels: arithmetic, and the activations with their backward. Every operand is f32 and comes resolved by the
// front-ends in tensor/ops/ to data, an offset and one stride per dim of `shape` (stride 0
// for a broadcast dim); outputs never overlap inputs except an output that is exactly an
// input (in-place accumulation), which is safe because each element is read before it is
// written. Runs are chunked over threads (Note [Elementwise parallel chunks]).
#pragma once

#include <cmath>

#include "tensor/cpu/copy.h"

namespace fitgrad::cpu {

// out = f(x, param). `param` is the scale, the added scalar or the exponent.
enum class UnaryOp { neg, exp, tanh, log, sqrt, rsqrt, pow, scale, add_scalar, gelu, silu };
void unary_f32(UnaryOp op, float param, const Shape& shape, const StridedOperand& out,
               const StridedOperand& x);

// out = f(a, b). For the activation backward ops a is dy and b is x; for swiglu a is the
// gate and b is up.
enum class BinaryOp { add, sub, mul, div, gelu_backward, silu_backward, swiglu };
void binary_f32(BinaryOp op, const Shape& shape, const StridedOperand& out, const StridedOperand& a,
                const StridedOperand& b);

// dgate = dy * up * silu'(gate), dup = dy * silu(gate), in one pass.
void swiglu_backward_f32(const Shape& shape, const StridedOperand& dgate, const StridedOperand& dup,
                         const StridedOperand& dy, const StridedOperand& gate,
                         const StridedOperand& up);

// ---- the scalar activation formulas, in f32 ----

// Note [gelu through sigmoid]
// The tanh approximation 0.5 x (1 + tanh(u)), u = k (x + c x^3), k = sqrt(2 / pi), is
// computed as x * sigmoid(2u): 0.5 (1 + tanh(u)) = sigmoid(2u) exactly, and one exp is
// much cheaper than tanh in f32 while losing nothing to cancellation. The derivative is
// s + 2 x s (1 - s) u', s = sigmoid(2u), u' = k (1 + 3 c x^2), the same expression as
// 0.5 (1 + t) + 0.5 x (1 - t^2) u' with t = tanh(u). The CPU kernels evaluate both
// sixteen lanes at a time (Note [Vectorised gelu] in elementwise.cpp).
inline constexpr float kGeluK = 0.7978845608028654f;
inline constexpr float kGeluC = 0.044715f;
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// silu(x) = x sigmoid(x); sigmoid(-inf) = 1 / (1 + inf) = 0, so no inf reaches a product.
inline float silu(float x) { return x * sigmoid(x); }
// d silu / dx = s (1 + x (1 - s)), s = sigmoid(x).
inline float silu_grad(float x) {
  const float s = sigmoid(x);
  return s * (1.0f + x * (1.0f - s));
}

}  // namespace fitgrad::cpu
