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

#include "cuda/kernels/launch.h"
#include "tensor/dtype.h"

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

// Records one out-of-range index (Note [Device error flags] in cuda/error_flags.h); any of
// the racing stores of `example` may win, which is all the message needs.
__device__ __forceinline__ void record_error(DeviceErrorRecord* errors, int64_t index) {
  atomicAdd(&errors->bad, 1ull);
  errors->example = static_cast<long long>(index);
}

// The larger of a and b, NaN if either is (a NaN score must reach the attention output).
__device__ __forceinline__ float nan_max(float a, float b) { return (b > a || b != b) ? b : a; }

// The maximum of `v` over the warp (fmaxf: a NaN loses to a number), in every lane.
__device__ __forceinline__ float warp_fmax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The sum of `v` over the block (blockDim.x a multiple of 32, at most 1024), returned to
// every thread; `scratch` holds 32 values of T in shared memory. The additions' order is
// fixed by the block size, so a reduction is the same bit for bit on every run.
template <class T>
__device__ __forceinline__ T block_sum(T v, T* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : T(0);
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The maximum of `v` over the block, as block_sum (fmaxf: a NaN loses to a number).
__device__ __forceinline__ float block_max(float v, float* scratch) {
  v = warp_fmax(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  return warp_fmax(lane < warps ? scratch[lane] : -INFINITY);
}

// A dtype's element type, as a value a generic lambda can take.
template <class E>
struct ElementTag {
  using type = E;
};

// Calls fn(ElementTag<E>{}) for a floating dtype's device type and returns true; any other
// dtype calls nothing and returns false (a launcher then answers cudaErrorInvalidValue).
template <class Fn>
bool dispatch_floating(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32: fn(ElementTag<float>{}); return true;
    case DType::bf16: fn(ElementTag<bf16>{}); return true;
    case DType::f16: fn(ElementTag<f16>{}); return true;
    default: return false;
  }
}

}  // namespace fitgrad::cuda
