// Activation front-ends (see ops/activation.h): checks and allocation through the shared
// elementwise plumbing of ops/elementwise.h, which dispatches through the kernel table.
#include "tensor/ops/activation.h"

#include "tensor/ops/elementwise.h"
#include "tensor/ops/op_util.h"

namespace fitgrad::ops {
namespace {

using backend::OpId;

Tensor unary(OpId id, const Tensor& x) {
  detail::check_inputs(backend::op_name(id), {{"x", &x}});
  return detail::run_elementwise(id, x.shape(), x.dtype(), {x}, 1)[0];
}

Tensor binary(OpId id, const char* a_name, const Tensor& a, const char* b_name, const Tensor& b) {
  const char* op = backend::op_name(id);
  detail::check_inputs(op, {{a_name, &a}, {b_name, &b}});
  check_shape(op, b_name, b, a.shape());
  return detail::run_elementwise(id, a.shape(), a.dtype(), {a, b}, 1)[0];
}

}  // namespace

Tensor gelu(const Tensor& x) { return unary(OpId::gelu, x); }
Tensor gelu_backward(const Tensor& dy, const Tensor& x) {
  return binary(OpId::gelu_backward, "dy", dy, "x", x);
}

Tensor silu(const Tensor& x) { return unary(OpId::silu, x); }
Tensor silu_backward(const Tensor& dy, const Tensor& x) {
  return binary(OpId::silu_backward, "dy", dy, "x", x);
}

Tensor swiglu(const Tensor& gate, const Tensor& up) {
  return binary(OpId::swiglu, "gate", gate, "up", up);
}

std::pair<Tensor, Tensor> swiglu_backward(const Tensor& dy, const Tensor& gate, const Tensor& up) {
  const char* op = backend::op_name(OpId::swiglu_backward);
  detail::check_inputs(op, {{"dy", &dy}, {"gate", &gate}, {"up", &up}});
  check_shape(op, "gate", gate, dy.shape());
  check_shape(op, "up", up, dy.shape());
  std::vector<Tensor> out =
      detail::run_elementwise(OpId::swiglu_backward, dy.shape(), dy.dtype(), {dy, gate, up}, 2);
  return {out[0], out[1]};
}

}  // namespace fitgrad::ops
