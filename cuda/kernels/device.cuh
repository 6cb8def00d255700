// What the .cu files share on the device: the element types of fitgrad's floating dtypes
// and their conversions to and from f32, rounded to nearest even as tensor/convert.h rounds
// on the CPU, and the grid-stride loop.
//
// Note [No fmt in .cu files]
// nvcc's C++20 host pass cannot compile fmt 9's headers, so no .cu file includes a fitgrad
// header that includes fmt (tensor/error.h, tensor/tensor.h, the kernel argument structs).
// The .cu files hold the kernels and their launchers, whose parameters are plain values
// and pointers (cuda/kernels/launch.h); the adapters in cuda/ops/*.cpp unpack the argument
// structs, check them, call a launcher and turn its cudaError_t into a fitgrad::Error.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace fitgrad::cuda {

using bf16 = __nv_bfloat16;
using f16 = __half;

template <class E>
__device__ __forceinline__ float to_f32(E x) {
  if constexpr (std::is_same_v<E, bf16>)
    return __bfloat162float(x);
  else if constexpr (std::is_same_v<E, f16>)
    return __half2float(x);
  else
    return float(x);
}

template <class E>
__device__ __forceinline__ E from_f32(float x) {
  if constexpr (std::is_same_v<E, bf16>)
    return __float2bfloat16_rn(x);
  else if constexpr (std::is_same_v<E, f16>)
    return __float2half_rn(x);
  else
    return E(x);
}

// for (i in [0, n)) over the whole grid.
#define FG_GRID_STRIDE(i, n)                                                \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += int64_t(gridDim.x) * blockDim.x)

// A dtype's element type, as a value a generic lambda can take.
template <class E>
struct ElementTag {
  using type = E;
};

}  // namespace fitgrad::cuda
