// The CPU reduction kernels: sum/mean over any set of dims, max over one dim, and the
// scatter of max's backward. The front-ends in tensor/ops/reduce.cpp split the input's
// dims into kept dims (one output element per index) and reduced dims, each with
// resolved strides, and hand over the data in its own dtype E (float, BFloat16 or Half;
// sums accumulate in double, max compares exactly); outputs are contiguous in kept-dim order.
// Sums are bitwise reproducible for any thread count (Note [Sum accumulation order]).
#pragma once

#include <cstdint>

#include "tensor/half.h"
#include "tensor/shape.h"

namespace fitgrad::cpu {

// The doubles of the workspace `sum` needs for its partial sums (few outputs over a long
// reduction: Note [Sum accumulation order]); 0 when it needs none.
int64_t sum_workspace_doubles(const Shape& kept_shape, const Strides& kept_strides,
                              const Shape& reduced_shape);

// out[o] = (sum over r of a[o . kept_strides + r . reduced_strides]) / divisor, for every
// index o of kept_shape (row-major) and r of reduced_shape; `a` points at element 0.
// An empty reduction gives 0 / divisor. partial holds sum_workspace_doubles doubles.
template <class E>
void sum(const Shape& kept_shape, const Strides& kept_strides,        // (O...)
         const Shape& reduced_shape, const Strides& reduced_strides,  // (R...)
         const E* a, double divisor, E* out,                          // out: numel(kept_shape)
         double* partial);

// For every kept index o, the maximum of a[o . kept_strides + i * stride], i < size (size
// > 0), and the first i that attains it; a NaN wins over every number, the first NaN
// first (Note [Max picks the first maximum]).
template <class E>
void max(const Shape& kept_shape, const Strides& kept_strides, int64_t size, int64_t stride,
         const E* a, E* values, int64_t* indices);  // values, indices: (O)

// dx[o . kept_strides + indices[o] * stride] = dy[o] for every kept index o; dx is zeroed
// by the caller. Throws "[max_backward] ..." when an index is not in [0, size).
template <class E>
void max_backward(const Shape& kept_shape, const Strides& kept_strides, int64_t size,
                  int64_t stride, const E* dy, const int64_t* indices,  // (O)
                  E* dx);

}  // namespace fitgrad::cpu
