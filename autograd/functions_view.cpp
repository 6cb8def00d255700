// Differentiable views (functions.h): each rule maps the gradient back through the
// inverse view, or scatters it into zeros for a narrowed input.
#include "autograd/functions.h"
#include "autograd/lambda_node.h"
#include "tensor/ops/reduce.h"

namespace fitgrad::autograd {

using Grads = std::vector<Tensor>;

namespace {

// A view that must copy (reshape of a non-contiguous tensor, contiguous) allocates its
// result as an activation when recording, as every other op does: the next op usually
// saves it (merged attention heads feed a projection).
template <class Forward, class Rule>
Tensor view_op(const char* name, const Tensor& x, Forward forward, Rule rule) {
  const bool rec = needs_record({&x});
  Tensor out;
  {
    ForwardScope scope(rec);
    out = own(forward(x), x);
  }
  if (!rec) return out;
  record(make_node(name, [rule](Node&, Grads& g) { return Grads{rule(g[0])}; }), {&x}, {&out});
  return out;
}

}  // namespace

Tensor reshape(const Tensor& x, const Shape& shape) {
  return view_op(
      "reshape", x, [&](const Tensor& t) { return t.reshape(shape); },
      [in = x.shape()](const Tensor& g) { return g.reshape(in); });
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  return view_op(
      "transpose", x, [&](const Tensor& t) { return t.transpose(dim0, dim1); },
      [dim0, dim1](const Tensor& g) { return g.transpose(dim0, dim1); });
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  std::vector<int64_t> inverse(dims.size());
  Tensor out = x.permute(dims);  // validates dims first
  for (size_t i = 0; i < dims.size(); ++i)
    inverse[size_t(wrap_dim(dims[i], x.dim(), "permute"))] = int64_t(i);
  return view_op(
      "permute", x, [&](const Tensor&) { return out; },
      [inverse](const Tensor& g) { return g.permute(inverse); });
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  const int64_t d = wrap_dim(dim, x.dim(), "narrow");
  return view_op(
      "narrow", x, [&](const Tensor& t) { return t.narrow(d, start, length); },
      [in = x.shape(), d, start, length](const Tensor& g) {
        Tensor dx = Tensor::zeros(in, g.dtype(), g.device());
        dx.narrow(d, start, length).copy_(g);
        return dx;
      });
}

Tensor expand(const Tensor& x, const Shape& shape) {
  return view_op(
      "expand", x, [&](const Tensor& t) { return t.expand(shape); },
      [in = x.shape()](const Tensor& g) { return ops::sum_to(g, in); });
}

Tensor contiguous(const Tensor& x) {
  return view_op(
      "contiguous", x, [](const Tensor& t) { return t.contiguous(); },
      [](const Tensor& g) { return g; });
}

}  // namespace fitgrad::autograd
