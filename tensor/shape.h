// Shapes and strides. All shape and stride arithmetic of the project lives in tensor/
// (DESIGN.md, Conventions); backends receive resolved sizes, strides and offsets.
// Strides count elements, not bytes, and may be 0 (an expanded dimension).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fitgrad {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

// Product of the sizes; 1 for a 0-d shape. Throws on negative sizes or int64 overflow.
int64_t numel(const Shape& shape);
// Row-major strides: the last dimension is contiguous.
Strides contiguous_strides(const Shape& shape);
bool is_contiguous(const Shape& shape, const Strides& strides);
// Wraps a possibly negative dim into [0, ndim); `op` names the caller in the error.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// "(2, 3, 4)"; "()" for a 0-d shape.
std::string shape_str(const Shape& shape);

}  // namespace fitgrad

namespace fitgrad {

// Drops size-1 dims and merges neighbours d-1, d that form one run in every stride set
// (strides[k][d-1] == shape[d] * strides[k][d]), keeping row-major order. See
// Note [Collapsing dims before a kernel].
void collapse_dims(Shape& shape, std::vector<Strides>& strides);

// NumPy broadcasting: sizes align from the right; a size-1 dim stretches. Throws
// "[op] shapes (..) and (..) do not broadcast" naming `op`.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace fitgrad
