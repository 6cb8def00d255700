// Softmax front-ends (see softmax.h): checks, the (outer, n, inner) view of the reduced
// dim, and dispatch through the kernel table (the kernels read bf16/f16 natively).
#include "tensor/ops/softmax.h"

#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/ops/op_util.h"

namespace fitgrad::ops {
namespace {

// The contiguous tensor as (outer, n, inner) around dim d.
struct Split {
  int64_t outer = 1, n = 1, inner = 1;
};

Split split_at(const Shape& shape, int64_t d) {
  Split s;
  for (int64_t i = 0; i < int64_t(shape.size()); ++i) {
    if (i < d) s.outer *= shape[size_t(i)];
    if (i > d) s.inner *= shape[size_t(i)];
  }
  s.n = shape[size_t(d)];
  return s;
}

int64_t reduced_dim(const char* op, const Tensor& t, int64_t dim) {
  FG_CHECK(t.dim() >= 1, "[{}] x must have at least 1 dim, got shape {}", op, shape_str(t.shape()));
  return wrap_dim(dim, t.dim(), op);
}

Tensor forward(backend::OpId id, const Tensor& x, int64_t dim, int64_t causal_t = 0) {
  const char* op = backend::op_name(id);
  check_floating(op, "x", x);
  const Split s = split_at(x.shape(), reduced_dim(op, x, dim));
  const Tensor xc = x.contiguous();                            // (outer, n, inner)
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());  // (outer, n, inner)
  backend::dispatch(id, x.device(), backend::SoftmaxArgs{s.outer, s.n, s.inner, xc, y, causal_t});
  return y;
}

Tensor backward(backend::OpId id, const Tensor& dy, const Tensor& y, int64_t dim) {
  const char* op = backend::op_name(id);
  check_floating(op, "dy", dy);
  check_floating(op, "y", y);
  check_same_device(op, {&dy, &y});
  check_shape(op, "dy", dy, y.shape());
  const Split s = split_at(y.shape(), reduced_dim(op, y, dim));
  // One dtype is read natively; a dy of another dtype stages both through f32.
  const bool native = dy.dtype() == y.dtype();
  const Tensor dyc = kernel_operand(dy, native);                        // (outer, n, inner)
  const Tensor yc = kernel_operand(y, native);                          // (outer, n, inner)
  Tensor dx = kernel_result(y.shape(), y.device(), y.dtype(), native);  // (outer, n, inner)
  backend::dispatch(id, y.device(),
                    backend::SoftmaxBackwardArgs{s.outer, s.n, s.inner, dyc, yc, dx});
  return cast_to(dx, y.dtype());
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return forward(backend::OpId::softmax, x, dim); }

Tensor causal_softmax(const Tensor& x) {
  FG_CHECK(x.defined() && x.dim() >= 2, "[softmax] causal scores must be (..., T, S), got {}",
           x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  const int64_t t = x.size(-2), s = x.size(-1);
  FG_CHECK(t >= 1 && t <= s, "[softmax] causal scores (..., T, S) need 1 <= T <= S, got {}",
           shape_str(x.shape()));
  return forward(backend::OpId::softmax, x, -1, t);
}

Tensor softmax_backward(const Tensor& dy, const Tensor& y, int64_t dim) {
  return backward(backend::OpId::softmax_backward, dy, y, dim);
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  return forward(backend::OpId::log_softmax, x, dim);
}

Tensor log_softmax_backward(const Tensor& dy, const Tensor& y, int64_t dim) {
  return backward(backend::OpId::log_softmax_backward, dy, y, dim);
}

}  // namespace fitgrad::ops
