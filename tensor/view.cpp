// The view ops of Tensor: slice, narrow, select, transpose, permute, view, reshape,
// expand, unsqueeze and squeeze. Each makes a new TensorImpl over the same Storage with
// new sizes, strides and offset; no element moves (reshape copies only when no view
// exists). All stride arithmetic of the project lives here and in shape.cpp.
#include <algorithm>
#include <optional>

#include "tensor/tensor.h"

namespace fitgrad {

namespace {

Tensor make_view(const Tensor& t, Shape shape, Strides strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = t.dtype();
  return Tensor(std::move(impl));
}

// Resolves one -1 in `shape` so that it has `numel` elements.
Shape infer_shape(const Tensor& t, const Shape& shape, const char* op) {
  const int64_t n = t.numel();
  Shape out = shape;
  int64_t known = 1;
  std::optional<size_t> infer;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == -1) {
      FG_CHECK(!infer, "[{}] shape {} has more than one -1", op, shape_str(shape));
      infer = d;
    } else {
      FG_CHECK(out[d] >= 0, "[{}] shape {} has a negative size", op, shape_str(shape));
      known *= out[d];
    }
  }
  if (infer) {
    FG_CHECK(known != 0 && n % known == 0,
             "[{}] shape {} is invalid for a tensor of shape {} ({} elements)", op,
             shape_str(shape), shape_str(t.shape()), n);
    out[*infer] = n / known;
  }
  FG_CHECK(numel(out) == n, "[{}] shape {} is invalid for a tensor of shape {} ({} elements)", op,
           shape_str(shape), shape_str(t.shape()), n);
  return out;
}

// Note [When a view can reshape]
// A reshape keeps the row-major order of the elements, so it is a view exactly when
// every new dim lies inside a run of old dims that the strides lay out as one block.
// Ignoring size-1 dims, old dims d-1, d form one block when stride[d-1] == size[d] *
// stride[d]; a block is then (total size, stride of its innermost dim). The new dims
// must split the blocks in order, each group of new dims multiplying to one block's
// size, and inside a group the strides are laid out row-major from the block's
// innermost stride. A size-1 new dim can take any stride: it gets the one a contiguous
// layout would give. Empty tensors have no elements to place, so any shape of the same
// numel (zero) is a view with contiguous strides.
std::optional<Strides> view_strides(const Shape& shape, const Strides& strides,
                                    const Shape& new_shape) {
  if (numel(shape) == 0) return contiguous_strides(new_shape);
  struct Block {
    int64_t size;
    int64_t stride;  // of the innermost dim
  };
  std::vector<Block> blocks;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!blocks.empty() && blocks.back().stride == shape[d] * strides[d]) {
      blocks.back().size *= shape[d];
      blocks.back().stride = strides[d];
    } else {
      blocks.push_back({shape[d], strides[d]});
    }
  }
  Strides out(new_shape.size(), 0);
  size_t next = 0;  // first new dim not yet placed
  for (const Block& b : blocks) {
    while (next < new_shape.size() && new_shape[next] == 1) ++next;
    size_t end = next;
    int64_t size = 1;
    while (end < new_shape.size() && size < b.size) size *= new_shape[end++];
    if (size != b.size) return std::nullopt;
    int64_t stride = b.stride;
    for (size_t d = end; d-- > next;) {
      out[d] = stride;
      stride *= new_shape[d];
    }
    next = end;
  }
  for (size_t d = new_shape.size(); d-- > 0;)
    if (new_shape[d] == 1) out[d] = d + 1 < new_shape.size() ? out[d + 1] * new_shape[d + 1] : 1;
  return out;
}

}  // namespace

Tensor Tensor::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  const size_t d = size_t(wrap_dim(dim, this->dim(), "slice"));
  FG_CHECK(step > 0, "[slice] step must be positive, got {} (shape {})", step, shape_str(shape()));
  const int64_t n = shape()[d];
  auto clamp = [n](int64_t i) { return std::clamp(i < 0 ? i + n : i, int64_t(0), n); };
  start = clamp(start);
  end = clamp(end);
  const int64_t length = end > start ? (end - start + step - 1) / step : 0;
  Shape s = shape();
  Strides st = strides();
  const int64_t off = offset() + start * st[d];
  s[d] = length;
  st[d] *= step;
  return make_view(*this, std::move(s), std::move(st), off);
}

Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  const size_t d = size_t(wrap_dim(dim, this->dim(), "narrow"));
  const int64_t n = shape()[d];
  const int64_t s = start < 0 ? start + n : start;
  FG_CHECK(s >= 0 && length >= 0 && s <= n - length,
           "[narrow] start {} and length {} are out of range for dim {} of shape {}", start, length,
           dim, shape_str(shape()));
  return slice(int64_t(d), s, s + length);
}

Tensor Tensor::select(int64_t dim, int64_t index) const {
  const size_t d = size_t(wrap_dim(dim, this->dim(), "select"));
  const int64_t n = shape()[d];
  const int64_t i = index < 0 ? index + n : index;
  FG_CHECK(i >= 0 && i < n, "[select] index {} is out of range for dim {} of shape {}", index, dim,
           shape_str(shape()));
  Shape s = shape();
  Strides st = strides();
  const int64_t off = offset() + i * st[d];
  s.erase(s.begin() + int64_t(d));
  st.erase(st.begin() + int64_t(d));
  return make_view(*this, std::move(s), std::move(st), off);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  const size_t a = size_t(wrap_dim(dim0, dim(), "transpose"));
  const size_t b = size_t(wrap_dim(dim1, dim(), "transpose"));
  Shape s = shape();
  Strides st = strides();
  std::swap(s[a], s[b]);
  std::swap(st[a], st[b]);
  return make_view(*this, std::move(s), std::move(st), offset());
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  const int64_t n = dim();
  auto bad = [&] {
    return fmt::format("[permute] dims {} are not a permutation of the dims of shape {}",
                       shape_str(dims), shape_str(shape()));
  };
  if (int64_t(dims.size()) != n) throw Error(bad());
  std::vector<bool> seen(static_cast<size_t>(n), false);
  Shape s(static_cast<size_t>(n));
  Strides st(static_cast<size_t>(n));
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = dims[i] < 0 ? dims[i] + n : dims[i];
    if (d < 0 || d >= n || seen[size_t(d)]) throw Error(bad());
    seen[size_t(d)] = true;
    s[i] = shape()[size_t(d)];
    st[i] = strides()[size_t(d)];
  }
  return make_view(*this, std::move(s), std::move(st), offset());
}

Tensor Tensor::view(const Shape& shape) const {
  Shape s = infer_shape(*this, shape, "view");
  std::optional<Strides> st = view_strides(this->shape(), strides(), s);
  FG_CHECK(st.has_value(),
           "[view] a tensor of shape {} and strides {} cannot be viewed as shape {}: its "
           "strides do not merge (use reshape, which copies)",
           shape_str(this->shape()), shape_str(strides()), shape_str(shape));
  return make_view(*this, std::move(s), std::move(*st), offset());
}

Tensor Tensor::reshape(const Shape& shape) const {
  Shape s = infer_shape(*this, shape, "reshape");
  if (std::optional<Strides> st = view_strides(this->shape(), strides(), s))
    return make_view(*this, std::move(s), std::move(*st), offset());
  return clone().view(s);
}

Tensor Tensor::expand(const Shape& shape) const {
  const int64_t n = dim();
  const int64_t m = int64_t(shape.size());
  auto fail = [&](std::string why) {
    return Error(fmt::format("[expand] cannot expand shape {} to {}: {}", shape_str(this->shape()),
                             shape_str(shape), why));
  };
  if (m < n) throw fail("the target has fewer dims");
  Shape s(static_cast<size_t>(m));
  Strides st(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) {
    const int64_t j = i - (m - n);  // the matching dim of this tensor, if any
    const int64_t target = shape[size_t(i)];
    if (j < 0) {
      if (target < 0) throw fail(fmt::format("new leading dim {} needs a size, got {}", i, target));
      s[size_t(i)] = target;
      st[size_t(i)] = 0;
      continue;
    }
    const int64_t size = this->shape()[size_t(j)];
    if (target < -1) throw fail(fmt::format("dim {} has the negative size {}", i, target));
    if (target == -1 || target == size) {
      s[size_t(i)] = size;
      st[size_t(i)] = strides()[size_t(j)];
    } else if (size == 1 && target >= 0) {
      s[size_t(i)] = target;
      st[size_t(i)] = 0;
    } else {
      throw fail(fmt::format("dim {} has size {}, and only size-1 dims expand", j, size));
    }
  }
  return make_view(*this, std::move(s), std::move(st), offset());
}

Tensor Tensor::unsqueeze(int64_t dim) const {
  const size_t d = size_t(wrap_dim(dim, this->dim() + 1, "unsqueeze"));
  Shape s = shape();
  Strides st = strides();
  const int64_t stride = d < s.size() ? st[d] * std::max<int64_t>(s[d], 1) : 1;
  s.insert(s.begin() + int64_t(d), 1);
  st.insert(st.begin() + int64_t(d), stride);
  return make_view(*this, std::move(s), std::move(st), offset());
}

Tensor Tensor::squeeze(int64_t dim) const {
  const size_t d = size_t(wrap_dim(dim, this->dim(), "squeeze"));
  FG_CHECK(shape()[d] == 1, "[squeeze] dim {} of shape {} has size {}, not 1", dim,
           shape_str(shape()), shape()[d]);
  Shape s = shape();
  Strides st = strides();
  s.erase(s.begin() + int64_t(d));
  st.erase(st.begin() + int64_t(d));
  return make_view(*this, std::move(s), std::move(st), offset());
}

}  // namespace fitgrad
