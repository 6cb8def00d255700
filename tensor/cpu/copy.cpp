// The CPU strided copy and fill kernels (see cpu/copy.h).
#include "tensor/cpu/copy.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "tensor/convert.h"
#include "tensor/error.h"

namespace fitgrad::cpu {

namespace {

// Calls body(dst_index, src_index) for every index of `shape` in row-major order, where
// the two arguments are element offsets of the operands. The last dim is the inner loop.
template <class Body>
void for_each_index(const Shape& shape, const Strides& dst_strides, int64_t dst_offset,
                    const Strides& src_strides, int64_t src_offset, Body&& body) {
  const size_t ndim = shape.size();
  if (ndim == 0) {
    body(dst_offset, src_offset);
    return;
  }
  const int64_t inner = shape[ndim - 1];
  const int64_t dst_inner = dst_strides[ndim - 1];
  const int64_t src_inner = src_strides[ndim - 1];
  int64_t outer = 1;
  for (size_t d = 0; d + 1 < ndim; ++d) outer *= shape[d];
  std::vector<int64_t> index(ndim - 1, 0);  // odometer over the outer dims
  int64_t di = dst_offset;
  int64_t si = src_offset;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) body(di + i * dst_inner, si + i * src_inner);
    for (size_t d = ndim - 1; d-- > 0;) {
      if (++index[d] < shape[d]) {
        di += dst_strides[d];
        si += src_strides[d];
        break;
      }
      di -= dst_strides[d] * (shape[d] - 1);
      si -= src_strides[d] * (shape[d] - 1);
      index[d] = 0;
    }
  }
}

}  // namespace

void copy_strided(const Shape& shape, const StridedOperand& dst, const StridedOperand& src) {
  FG_ASSERT(dst.strides.size() == shape.size() && src.strides.size() == shape.size());
  const int64_t n = numel(shape);
  if (n == 0) return;
  if (dst.dtype == src.dtype && is_contiguous(shape, dst.strides) &&
      is_contiguous(shape, src.strides)) {
    const size_t size = element_size(dst.dtype);
    std::memcpy(static_cast<char*>(dst.data) + dst.offset * size,
                static_cast<const char*>(src.data) + src.offset * size, size_t(n) * size);
    return;
  }
  dispatch_dtype(dst.dtype, [&](auto dst_tag) {
    dispatch_dtype(src.dtype, [&](auto src_tag) {
      using D = decltype(dst_tag);
      using S = decltype(src_tag);
      D* out = static_cast<D*>(dst.data);
      const S* in = static_cast<const S*>(src.data);
      for_each_index(shape, dst.strides, dst.offset, src.strides, src.offset,
                     [&](int64_t di, int64_t si) { out[di] = convert<D>(in[si]); });
    });
  });
}

void fill_strided(const Shape& shape, const StridedOperand& dst, double value) {
  FG_ASSERT(dst.strides.size() == shape.size());
  const int64_t n = numel(shape);
  if (n == 0) return;
  dispatch_dtype(dst.dtype, [&](auto tag) {
    using D = decltype(tag);
    const D v = convert<D>(value);
    D* out = static_cast<D*>(dst.data);
    if (is_contiguous(shape, dst.strides)) {
      std::fill_n(out + dst.offset, n, v);
      return;
    }
    for_each_index(shape, dst.strides, dst.offset, dst.strides, dst.offset,
                   [&](int64_t di, int64_t) { out[di] = v; });
  });
}

}  // namespace fitgrad::cpu
