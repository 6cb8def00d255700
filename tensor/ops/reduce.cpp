// Reduction front-ends (see ops/reduce.h): dim handling, the split of the input's dims
// into kept and reduced dims with their strides, output allocation, then the dispatch. The
// kernels read and write the input's floating dtype (sums accumulate in double). A sum with
// few outputs over a long reduction (a full sum of a large tensor) splits each output's
// reduction into blocks summed by different threads (Note [Sum accumulation order] in
// tensor/cpu/reduce.cpp), whose partial sums get a double workspace (Note [Double
// workspaces] in op_util.h).
#include "tensor/ops/reduce.h"

#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/backend/profile.h"
#include "tensor/error.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/op_util.h"

namespace fitgrad::ops {
namespace {

// Which dims of an `ndim`-d tensor `dims` names (all when empty); throws on duplicates.
std::vector<bool> reduced_dims(const char* op, int64_t ndim, const std::vector<int64_t>& dims) {
  std::vector<bool> reduced(size_t(ndim), dims.empty());
  for (int64_t dim : dims) {
    const int64_t d = wrap_dim(dim, ndim, op);
    FG_CHECK(!reduced[size_t(d)], "[{}] dim {} appears more than once in the dims {}", op, d,
             shape_str(dims));
    reduced[size_t(d)] = true;
  }
  return reduced;
}

Tensor sum_or_mean(const char* op, const Tensor& a, const std::vector<int64_t>& dims, bool keepdim,
                   bool mean) {
  check_floating(op, "a", a);
  const std::vector<bool> reduced = reduced_dims(op, a.dim(), dims);
  const Tensor& x = a;
  Shape out_shape;
  Shape kept_shape, red_shape;
  std::vector<Strides> kept(1), red(1);
  for (int64_t d = 0; d < a.dim(); ++d) {
    const int64_t size = a.size(d);
    if (reduced[size_t(d)]) {
      if (keepdim) out_shape.push_back(1);
      red_shape.push_back(size);
      red[0].push_back(x.stride(d));
    } else {
      out_shape.push_back(size);
      kept_shape.push_back(size);
      kept[0].push_back(x.stride(d));
    }
  }
  Tensor out = Tensor::empty(out_shape, a.dtype(), a.device());
  const double count = double(numel(red_shape));
  collapse_dims(kept_shape, kept);
  collapse_dims(red_shape, red);
  const int64_t doubles = backend::sum_workspace_doubles(backend::profile_for(a.device()),
                                                         kept_shape, kept[0], red_shape);
  backend::dispatch(backend::OpId::sum, a.device(),
                    backend::SumArgs{kept_shape, red_shape, kept[0], red[0], x, mean ? count : 1.0,
                                     out, f64_workspace(doubles, a.device())});
  return out;
}

}  // namespace

Tensor sum(const Tensor& a, std::vector<int64_t> dims, bool keepdim) {
  return sum_or_mean("sum", a, dims, keepdim, false);
}

Tensor mean(const Tensor& a, std::vector<int64_t> dims, bool keepdim) {
  return sum_or_mean("mean", a, dims, keepdim, true);
}

MaxOut max(const Tensor& a, int64_t dim, bool keepdim) {
  check_floating("max", "a", a);
  const int64_t d = wrap_dim(dim, a.dim(), "max");
  FG_CHECK(a.size(d) > 0, "[max] dim {} of shape {} is empty: there is no maximum", d,
           shape_str(a.shape()));
  const Tensor& x = a;
  Shape out_shape = a.shape();
  Shape kept_shape = a.shape();
  Strides kept_strides = x.strides();
  kept_shape.erase(kept_shape.begin() + d);
  kept_strides.erase(kept_strides.begin() + d);
  if (keepdim)
    out_shape[size_t(d)] = 1;
  else
    out_shape.erase(out_shape.begin() + d);
  MaxOut out{Tensor::empty(out_shape, a.dtype(), a.device()),
             Tensor::empty(out_shape, DType::i64, a.device())};
  backend::dispatch(backend::OpId::max, a.device(),
                    backend::MaxArgs{kept_shape, kept_strides, a.size(d), x.stride(d), x,
                                     out.values, out.indices});
  return out;
}

Tensor max_backward(const Tensor& dy, const Tensor& indices, const Shape& input_shape, int64_t dim,
                    bool keepdim) {
  const char* op = "max_backward";
  check_floating(op, "dy", dy);
  FG_CHECK(indices.defined() && indices.dtype() == DType::i64, "[{}] indices must be i64, got {}",
           op, indices.defined() ? dtype_name(indices.dtype()) : "an undefined tensor");
  check_same_device(op, {&dy, &indices});
  const int64_t d = wrap_dim(dim, int64_t(input_shape.size()), op);
  Shape out_shape = input_shape;
  if (keepdim)
    out_shape[size_t(d)] = 1;
  else
    out_shape.erase(out_shape.begin() + d);
  check_shape(op, "dy", dy, out_shape);
  check_shape(op, "indices", indices, out_shape);
  const Tensor g = dy.contiguous();
  const Tensor idx = indices.contiguous();
  Tensor dx = Tensor::empty(input_shape, dy.dtype(), dy.device());
  dx.fill_(0.0);
  Shape kept_shape = input_shape;
  Strides kept_strides = dx.strides();
  const int64_t stride = kept_strides[size_t(d)];
  kept_shape.erase(kept_shape.begin() + d);
  kept_strides.erase(kept_strides.begin() + d);
  backend::dispatch(backend::OpId::max_backward, dy.device(),
                    backend::MaxBackwardArgs{kept_shape, kept_strides, input_shape[size_t(d)],
                                             stride, g, idx, dx});
  return dx;
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
  check_floating("sum_to", "g", g);
  FG_CHECK(
      shape.size() <= g.shape().size() && broadcast_shapes(shape, g.shape(), "sum_to") == g.shape(),
      "[sum_to] shape {} does not broadcast to the gradient's shape {}", shape_str(shape),
      shape_str(g.shape()));
  const size_t lead = g.shape().size() - shape.size();
  std::vector<int64_t> dims;
  for (size_t d = 0; d < g.shape().size(); ++d)
    if (d < lead || (shape[d - lead] == 1 && g.shape()[d] != 1)) dims.push_back(int64_t(d));
  if (dims.empty()) return g.reshape(shape);
  return sum(g, dims, true).reshape(shape);
}

}  // namespace fitgrad::ops
