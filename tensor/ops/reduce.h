// Reduction op front-ends (issue 3): sum and mean over any dims, max over one dim with
// its indices, and the backward helpers max_backward and sum_to. Raw ops without
// autograd; f32, f16 or bf16 storage, computed in f32 with sums accumulated in double
// (Note [Sum accumulation order] in cpu/reduce.cpp), returned in the input dtype. Inputs
// may be any views. Kernels are in cpu/reduce.h.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace fitgrad::ops {

// Sum over `dims` (empty: every dim; negative dims wrap; a dim given twice is an error).
// keepdim keeps each reduced dim as size 1. Summing over a size-0 dim gives 0.
Tensor sum(const Tensor& a, std::vector<int64_t> dims, bool keepdim = false);
// sum / (number of elements reduced); NaN when that number is 0.
Tensor mean(const Tensor& a, std::vector<int64_t> dims, bool keepdim = false);

// The maximum over `dim` (of size > 0) and the i64 index of its first occurrence; a NaN
// wins (Note [Max picks the first maximum] in cpu/reduce.cpp).
struct MaxOut {
  Tensor values;   // a's dtype, a's shape without dim (size 1 with keepdim)
  Tensor indices;  // i64, the same shape
};
MaxOut max(const Tensor& a, int64_t dim, bool keepdim = false);

// The gradient of max: dy (max's output shape for this dim and keepdim) placed at
// `indices` along `dim` of a zero tensor of `input_shape`, in dy's dtype.
Tensor max_backward(const Tensor& dy, const Tensor& indices, const Shape& input_shape, int64_t dim,
                    bool keepdim);

// Sums g over the dims along which `shape` broadcasts to g's shape (the leading dims g has
// extra, and the dims where shape has size 1), so the gradient of a broadcast operand gets
// the operand's shape. When nothing needs summing it returns g itself (a view of the same
// storage, reshaped), as PyTorch's sum_to_size does.
Tensor sum_to(const Tensor& g, const Shape& shape);

}  // namespace fitgrad::ops
