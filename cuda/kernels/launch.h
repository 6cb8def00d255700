// The launchers of the CUDA kernels (cuda/kernels/*.cu): plain functions whose parameters
// are values, pointers and the stream, so that the adapters in cuda/ops/ (compiled as C++,
// where fitgrad's headers are) call them without the kernels seeing those headers (Note [No
// fmt in .cu files] in device.cuh). Each returns the launch's cudaError_t; a launcher over
// no elements launches nothing and returns cudaSuccess. Floating operands are named by
// their DType (f32, bf16 or f16) and read and written in it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tensor/dtype.h"

namespace fitgrad::cuda {

// ---- strided operands (elementwise.cu) ----

inline constexpr int kMaxDims = 8;

// N operands (outputs first) over a collapsed shape of `dims` dims: each operand's element
// 0 and its strides in elements; a broadcast dim has stride 0.
template <int N>
struct StridedPack {
  int dims = 0;
  int64_t sizes[kMaxDims] = {};
  char* data[N] = {};
  int64_t strides[N][kMaxDims] = {};
};

// dst = convert(src) elementwise, any storage dtypes (tensor/convert.h's rules).
cudaError_t launch_copy(const StridedPack<2>& p, int64_t n, DType dst, DType src,
                        cudaStream_t stream);
// dst = the element whose storage bits are `bits` (the value already converted to dtype).
cudaError_t launch_fill(const StridedPack<1>& p, int64_t n, DType dtype, uint64_t bits,
                        cudaStream_t stream);

// The f32 elementwise ops, in tensor/cpu/elementwise.h's order and with its formulas.
enum class Elementwise : int {
  neg, exp, log, sqrt, rsqrt, pow, scale, add_scalar, gelu, silu,  // out, x
  add, sub, mul, div, gelu_backward, silu_backward, swiglu          // out, a, b
};
cudaError_t launch_unary(Elementwise op, const StridedPack<2>& p, int64_t n, float param,
                         cudaStream_t stream);
cudaError_t launch_binary(Elementwise op, const StridedPack<3>& p, int64_t n, cudaStream_t stream);
// Operands dgate, dup, dy, gate, up.
cudaError_t launch_swiglu_backward(const StridedPack<5>& p, int64_t n, cudaStream_t stream);

}  // namespace fitgrad::cuda
