// Elementwise arithmetic front-ends (see ops/elementwise.h): checks, broadcasting and
// stride resolution, output allocation, then one dispatch through the kernel table.
#include "tensor/ops/elementwise.h"

#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/error.h"
#include "tensor/memory/scope.h"
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

backend::StridedOperand operand(const Tensor& t, Strides strides) {
  return {t.storage()->data(), t.offset(), std::move(strides), t.dtype()};
}

// Mixed floating dtypes promote (promote_floating), as PyTorch's arithmetic does.
Tensor binary(backend::OpId id, const Tensor& a, const Tensor& b) {
  const char* op = backend::op_name(id);
  check_floating(op, "a", a);
  check_floating(op, "b", b);
  check_same_device(op, {&a, &b});
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  return detail::run_elementwise(id, shape, promote_floating(a.dtype(), b.dtype()), {a, b}, 1)[0];
}

Tensor unary(backend::OpId id, double param, const Tensor& a) {
  detail::check_inputs(backend::op_name(id), {{"a", &a}});
  return detail::run_elementwise(id, a.shape(), a.dtype(), {a}, 1, float(param))[0];
}

}  // namespace

namespace detail {

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

std::vector<Tensor> run_elementwise(backend::OpId id, const Shape& shape, DType dtype,
                                    const std::vector<Tensor>& inputs, int n_out, float param) {
  // Inputs go to the kernel in their own dtypes and views, outputs are allocated in `dtype`
  // (Note [Native low-precision elementwise] in tensor/cpu/elementwise.cpp).
  const Device device = inputs.at(0).device();
  std::vector<Tensor> outputs;
  for (int i = 0; i < n_out; ++i) outputs.push_back(Tensor::empty(shape, dtype, device));
  if (numel(shape) > 0) {
    backend::ElementwiseArgs args{shape, {}, param};
    std::vector<Strides> strides;
    for (const Tensor& t : outputs) strides.push_back(t.strides());
    for (const Tensor& t : inputs) strides.push_back(broadcast_strides(t, shape));
    collapse_dims(args.shape, strides);
    for (size_t k = 0; k < outputs.size(); ++k)
      args.operands.push_back(operand(outputs[k], strides[k]));
    for (size_t k = 0; k < inputs.size(); ++k)
      args.operands.push_back(operand(inputs[k], strides[outputs.size() + k]));
    backend::dispatch(id, device, args);
  }
  return outputs;
}

}  // namespace detail

using backend::OpId;

Tensor add(const Tensor& a, const Tensor& b) { return binary(OpId::add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(OpId::sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(OpId::mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(OpId::div, a, b); }

Tensor scale(const Tensor& a, double s) { return unary(OpId::scale, s, a); }
Tensor add_scalar(const Tensor& a, double s) { return unary(OpId::add_scalar, s, a); }
Tensor neg(const Tensor& a) { return unary(OpId::neg, 0, a); }
Tensor exp(const Tensor& a) { return unary(OpId::exp, 0, a); }
Tensor tanh(const Tensor& a) { return unary(OpId::tanh, 0, a); }
Tensor log(const Tensor& a) { return unary(OpId::log, 0, a); }
Tensor sqrt(const Tensor& a) { return unary(OpId::sqrt, 0, a); }
Tensor rsqrt(const Tensor& a) { return unary(OpId::rsqrt, 0, a); }
Tensor pow(const Tensor& a, double p) { return unary(OpId::pow, p, a); }

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
  // dst is updated in place in its own dtype (Note [Native low-precision elementwise]).
  Tensor s = src;
  if (s.shares_storage_with(dst)) s = s.clone();  // it would change while being read
  dst.storage()->bump_version();
  if (dst.numel() > 0) {
    backend::ElementwiseArgs args{shape, {}, 0.0f};
    std::vector<Strides> strides = {dst.strides(), broadcast_strides(s, shape)};
    collapse_dims(args.shape, strides);
    args.operands = {operand(dst, strides[0]), operand(s, strides[1])};
    backend::dispatch(OpId::add_, dst.device(), args);
  }
}

}  // namespace fitgrad::ops
