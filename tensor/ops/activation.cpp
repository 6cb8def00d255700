// Activation front-ends (see ops/activation.h): checks and allocation through the shared
// elementwise plumbing of ops/elementwise.h, then the kernels of cpu/elementwise.h.
#include "tensor/ops/activation.h"

#include "tensor/cpu/elementwise.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/op_util.h"

namespace fitgrad::ops {
namespace {

using Operands = std::vector<cpu::StridedOperand>;

Tensor unary(const char* op, cpu::UnaryOp kind, const Tensor& x) {
  detail::check_inputs(op, {{"x", &x}});
  return detail::run_elementwise(
      op, x.shape(), x.dtype(), {x}, 1,
      [kind](const Shape& s, const Operands& t) { cpu::unary_f32(kind, 0.0f, s, t[0], t[1]); })[0];
}

// A binary activation op over two same-shape operands named `a` and `b`.
Tensor binary(const char* op, cpu::BinaryOp kind, const char* a_name, const Tensor& a,
              const char* b_name, const Tensor& b) {
  detail::check_inputs(op, {{a_name, &a}, {b_name, &b}});
  check_shape(op, b_name, b, a.shape());
  return detail::run_elementwise(
      op, a.shape(), a.dtype(), {a, b}, 1,
      [kind](const Shape& s, const Operands& t) { cpu::binary_f32(kind, s, t[0], t[1], t[2]); })[0];
}

}  // namespace

Tensor gelu(const Tensor& x) { return unary("gelu", cpu::UnaryOp::gelu, x); }
Tensor gelu_backward(const Tensor& dy, const Tensor& x) {
  return binary("gelu_backward", cpu::BinaryOp::gelu_backward, "dy", dy, "x", x);
}

Tensor silu(const Tensor& x) { return unary("silu", cpu::UnaryOp::silu, x); }
Tensor silu_backward(const Tensor& dy, const Tensor& x) {
  return binary("silu_backward", cpu::BinaryOp::silu_backward, "dy", dy, "x", x);
}

Tensor swiglu(const Tensor& gate, const Tensor& up) {
  return binary("swiglu", cpu::BinaryOp::swiglu, "gate", gate, "up", up);
}

std::pair<Tensor, Tensor> swiglu_backward(const Tensor& dy, const Tensor& gate, const Tensor& up) {
  const char* op = "swiglu_backward";
  detail::check_inputs(op, {{"dy", &dy}, {"gate", &gate}, {"up", &up}});
  check_shape(op, "gate", gate, dy.shape());
  check_shape(op, "up", up, dy.shape());
  std::vector<Tensor> out = detail::run_elementwise(
      op, dy.shape(), dy.dtype(), {dy, gate, up}, 2, [](const Shape& s, const Operands& t) {
        cpu::swiglu_backward_f32(s, t[0], t[1], t[2], t[3], t[4]);
      });
  return {out[0], out[1]};
}

}  // namespace fitgrad::ops
