// Elementwise arithmetic front-ends (see ops/elementwise.h): checks, broadcasting and
// stride resolution, output allocation, then the kernels of cpu/elementwise.h.
#include "tensor/ops/elementwise.h"

#include "tensor/cpu/elementwise.h"
#include "tensor/error.h"
#include "tensor/ops/op_util.h"

namespace fitgrad::ops {
namespace {

// Note [Elementwise operands keep their strides]
// An f32 input goes to the kernel as the view it is: its strides, with stride 0 for every
// dim it broadcasts along (a missing leading dim or a size-1 dim), so neither a transposed
// or sliced input nor a broadcast operand is ever copied or materialised. A f16/bf16 input
// is converted to a contiguous f32 temporary of its own (un-broadcast) shape, as
// Note [Op dtypes and devices] prescribes, and then broadcast the same way. Outputs are
// fresh contiguous tensors of the broadcast shape. Before the kernel runs, size-1 dims are
// dropped and neighbouring dims that are one run in every operand are merged, so a
// contiguous op is one flat loop and a row-broadcast op is (rows, cols).

// The strides that read `t` as if expanded to `shape` (t broadcasts to it).
Strides broadcast_strides(const Tensor& t, const Shape& shape) {
  const size_t lead = shape.size() - size_t(t.dim());
  Strides s(shape.size(), 0);
  for (size_t d = lead; d < shape.size(); ++d) {
    const int64_t size = t.shape()[d - lead];
    s[d] = size == 1 && shape[d] != 1 ? 0 : t.strides()[d - lead];
  }
  return s;
}

cpu::StridedOperand operand(const Tensor& t, Strides strides) {
  return {t.storage()->data(), t.offset(), std::move(strides), DType::f32};
}

Tensor binary(const char* op, cpu::BinaryOp kind, const Tensor& a, const Tensor& b) {
  detail::check_inputs(op, {{"a", &a}, {"b", &b}});
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  return detail::run_elementwise(op, shape, a.dtype(), {a, b}, 1,
                                 [kind](const Shape& s, const std::vector<cpu::StridedOperand>& t) {
                                   cpu::binary_f32(kind, s, t[0], t[1], t[2]);
                                 })[0];
}

Tensor unary(const char* op, cpu::UnaryOp kind, double param, const Tensor& a) {
  detail::check_inputs(op, {{"a", &a}});
  return detail::run_elementwise(
      op, a.shape(), a.dtype(), {a}, 1,
      [kind, param](const Shape& s, const std::vector<cpu::StridedOperand>& t) {
        cpu::unary_f32(kind, float(param), s, t[0], t[1]);
      })[0];
}

}  // namespace

namespace detail {

Tensor as_f32(const Tensor& t) { return t.dtype() == DType::f32 ? t : t.to(DType::f32); }

void check_inputs(const char* op,
                  std::initializer_list<std::pair<const char*, const Tensor*>> inputs) {
  const std::pair<const char*, const Tensor*>* first = nullptr;
  for (const auto& input : inputs) {
    check_floating(op, input.first, *input.second);
    if (!first) {
      first = &input;
      continue;
    }
    FG_CHECK(input.second->dtype() == first->second->dtype(),
             "[{}] dtypes differ: {} is {}, {} is {}", op, first->first,
             dtype_name(first->second->dtype()), input.first, dtype_name(input.second->dtype()));
    check_same_device(op, {first->second, input.second});
  }
}

std::vector<Tensor> run_elementwise(const char* op, const Shape& shape, DType dtype,
                                    const std::vector<Tensor>& inputs, int n_out,
                                    const ElementwiseKernel& kernel) {
  const Device device = inputs.at(0).device();
  const bool compute = run_kernel(op, device);
  std::vector<Tensor> f32_inputs;
  for (const Tensor& t : inputs) f32_inputs.push_back(detail::as_f32(t));
  std::vector<Tensor> outputs;
  for (int i = 0; i < n_out; ++i) outputs.push_back(Tensor::empty(shape, DType::f32, device));
  if (compute && numel(shape) > 0) {
    Shape s = shape;
    std::vector<Strides> strides;
    for (const Tensor& t : outputs) strides.push_back(t.strides());
    for (const Tensor& t : f32_inputs) strides.push_back(broadcast_strides(t, shape));
    collapse_dims(s, strides);
    std::vector<cpu::StridedOperand> operands;
    for (size_t k = 0; k < outputs.size(); ++k) operands.push_back(operand(outputs[k], strides[k]));
    for (size_t k = 0; k < f32_inputs.size(); ++k)
      operands.push_back(operand(f32_inputs[k], strides[outputs.size() + k]));
    kernel(s, operands);
  }
  for (Tensor& t : outputs) t = cast_to(t, dtype);
  return outputs;
}

}  // namespace detail

Tensor add(const Tensor& a, const Tensor& b) { return binary("add", cpu::BinaryOp::add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary("sub", cpu::BinaryOp::sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary("mul", cpu::BinaryOp::mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary("div", cpu::BinaryOp::div, a, b); }

Tensor scale(const Tensor& a, double s) { return unary("scale", cpu::UnaryOp::scale, s, a); }
Tensor add_scalar(const Tensor& a, double s) {
  return unary("add_scalar", cpu::UnaryOp::add_scalar, s, a);
}
Tensor neg(const Tensor& a) { return unary("neg", cpu::UnaryOp::neg, 0, a); }
Tensor exp(const Tensor& a) { return unary("exp", cpu::UnaryOp::exp, 0, a); }
Tensor log(const Tensor& a) { return unary("log", cpu::UnaryOp::log, 0, a); }
Tensor sqrt(const Tensor& a) { return unary("sqrt", cpu::UnaryOp::sqrt, 0, a); }
Tensor rsqrt(const Tensor& a) { return unary("rsqrt", cpu::UnaryOp::rsqrt, 0, a); }
Tensor pow(const Tensor& a, double p) { return unary("pow", cpu::UnaryOp::pow, p, a); }

void add_(Tensor& dst, const Tensor& src) {
  check_floating("add_", "dst", dst);
  check_floating("add_", "src", src);
  check_same_device("add_", {&dst, &src});
  const Shape& shape = dst.shape();
  FG_CHECK(broadcast_shapes(shape, src.shape(), "add_") == shape,
           "[add_] src of shape {} does not broadcast to dst of shape {}", shape_str(src.shape()),
           shape_str(shape));
  for (int64_t d = 0; d < dst.dim(); ++d)
    FG_CHECK(dst.stride(d) != 0 || dst.size(d) <= 1,
             "[add_] dst of shape {} is an expanded view (stride 0 in dim {}): its elements alias "
             "one another",
             shape_str(shape), d);
  const bool compute = run_kernel("add_", dst.device());
  // An f32 dst is updated in place; any other dst through an f32 copy written back.
  Tensor acc = detail::as_f32(dst);
  Tensor s = detail::as_f32(src);
  if (s.shares_storage_with(acc)) s = s.clone();  // it would change while being read
  if (compute && dst.numel() > 0) {
    Shape n = shape;
    std::vector<Strides> strides = {acc.strides(), broadcast_strides(s, shape)};
    collapse_dims(n, strides);
    const cpu::StridedOperand out = operand(acc, strides[0]);
    cpu::binary_f32(cpu::BinaryOp::add, n, out, out, operand(s, strides[1]));
  }
  if (!acc.same(dst)) dst.copy_(acc);
}

}  // namespace fitgrad::ops
