// Shape and stride helpers.
#include "tensor/shape.h"

#include "tensor/error.h"

namespace fitgrad {

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) {
    FG_CHECK(s >= 0, "[shape] negative size in {}", shape_str(shape));
    FG_CHECK(!__builtin_mul_overflow(n, s, &n), "[shape] {} has more than 2^63 elements",
             shape_str(shape));
  }
  return n;
}

Strides contiguous_strides(const Shape& shape) {
  Strides strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

bool is_contiguous(const Shape& shape, const Strides& strides) {
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;  // the stride of a size-1 dim never matters
    if (shape[i] == 0) return true;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t d = dim < 0 ? dim + ndim : dim;
  FG_CHECK(d >= 0 && d < ndim, "[{}] dim {} is out of range for a {}-d tensor", op, dim, ndim);
  return d;
}

std::string shape_str(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + ")";
}

}  // namespace fitgrad

namespace fitgrad {

// Note [Collapsing dims before a kernel]
// A kernel's inner loop runs over its last dim, so the longer that dim the better. Size-1
// dims are dropped, and neighbours d-1, d that form a single run in every operand
// (stride[d-1] == size[d] * stride[d]) merge into one dim. A contiguous-to-contiguous
// copy becomes 1-d, and a row-sliced matrix copies whole rows per inner loop.
void collapse_dims(Shape& shape, std::vector<Strides>& strides) {
  Shape out_shape;
  std::vector<Strides> out(strides.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !out_shape.empty();
    for (size_t k = 0; k < strides.size() && merge; ++k)
      merge = out[k].back() == shape[d] * strides[k][d];
    if (merge) {
      out_shape.back() *= shape[d];
      for (size_t k = 0; k < strides.size(); ++k) out[k].back() = strides[k][d];
    } else {
      out_shape.push_back(shape[d]);
      for (size_t k = 0; k < strides.size(); ++k) out[k].push_back(strides[k][d]);
    }
  }
  shape = std::move(out_shape);
  strides = std::move(out);
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t sa = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t sb = i < n - b.size() ? 1 : b[i - (n - b.size())];
    FG_CHECK(sa == sb || sa == 1 || sb == 1, "[{}] shapes {} and {} do not broadcast", op,
             shape_str(a), shape_str(b));
    out[i] = sa == 1 ? sb : sa;
  }
  return out;
}

}  // namespace fitgrad
