// The cuda kernels of Q-GaLore's int8 group quantization (int8_launch.h). A warp takes one
// group: its lanes find the group's min and max (fminf / fmaxf, so the order of the
// reduction does not matter and the result equals the CPU's sequential one), lane 0 writes
// the scale and zero, and every lane codes its share of the values with tensor/quant/int8.h's
// rules, the same f32 operations as the CPU (Note [Int8 weights]; nvcc's default precise
// division and no contraction possible in those expressions), so the codes are the CPU's
// bit for bit. Stochastic rounding draws Philox draw offset + i for element i (Note [Philox
// streams]), whatever the grid. Dequantization is a thread per value.
#include <algorithm>

#include "cuda/kernels/device.cuh"
#include "cuda/kernels/int8_launch.h"
#include "tensor/backend/cuda_four_bit_launch.h"
#include "tensor/backend/cuda_launch.h"
#include "tensor/quant/int8.h"
#include "tensor/random/philox.h"

namespace fitgrad::cuda {
namespace {

using backend::kCudaWarp;
constexpr unsigned kThreads = backend::kCudaThreads;

__device__ __forceinline__ float warp_fmin(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// a (n) -> codes (n), scales and zeros (n / group_size): one warp per group.
template <class E>
__global__ void __launch_bounds__(kThreads)
    quantize_int8_kernel(const E* a, int64_t n, int64_t group_size, uint8_t* codes, float* scales,
                         uint8_t* zeros, bool stochastic, uint64_t seed, uint64_t offset) {
  const int lane = int(threadIdx.x % kCudaWarp);
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / kCudaWarp);
  const int64_t groups = n / group_size;
  // g is the same for the warp's 32 lanes, so every lane takes part in the shuffles.
  for (int64_t g = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kCudaWarp; g < groups;
       g += warps) {
    const int64_t begin = g * group_size, end = begin + group_size;
    float lo = INFINITY, hi = -INFINITY;
    for (int64_t i = begin + lane; i < end; i += kCudaWarp) {
      const float x = to_f32(a[i]);
      lo = fminf(lo, x);
      hi = fmaxf(hi, x);
    }
    lo = warp_fmin(lo);
    hi = warp_fmax(hi);
    const float scale = quant::int8_scale(lo, hi), zero = quant::int8_zero(lo, scale);
    if (lane == 0) {
      scales[g] = scale;
      zeros[g] = uint8_t(zero);
    }
    for (int64_t i = begin + lane; i < end; i += kCudaWarp)
      codes[i] = stochastic
                     ? quant::int8_code_stochastic(to_f32(a[i]), scale, zero,
                                                   philox_uniform(seed, offset + uint64_t(i)))
                     : quant::int8_code_nearest(to_f32(a[i]), scale, zero);
  }
}

template <class E>
__global__ void dequantize_int8_kernel(const uint8_t* codes, const float* scales,
                                       const uint8_t* zeros, int64_t n, int64_t group_size,
                                       E* out) {
  FG_GRID_STRIDE(i, n) {
    out[i] =
        from_f32<E>(quant::int8_value(codes[i], zeros[i / group_size], scales[i / group_size]));
  }
}

}  // namespace

cudaError_t launch_quantize_int8(const void* a, DType dtype, int64_t n, int64_t group_size,
                                 uint8_t* codes, float* scales, uint8_t* zeros, bool stochastic,
                                 uint64_t seed, uint64_t offset, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const int64_t warps_per_block = kThreads / kCudaWarp;
  const unsigned blocks = unsigned(
      std::min(backend::cuda_ceil_div(n / group_size, warps_per_block), backend::kCudaMaxBlocks));
  const bool known = dispatch_floating(dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    quantize_int8_kernel<E><<<blocks, kThreads, 0, stream>>>(
        static_cast<const E*>(a), n, group_size, codes, scales, zeros, stochastic, seed, offset);
  });
  return known ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t launch_dequantize_int8(const uint8_t* codes, const float* scales, const uint8_t* zeros,
                                   int64_t n, int64_t group_size, void* out, DType dtype,
                                   cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const unsigned blocks = unsigned(backend::cuda_elementwise_blocks(n));
  const bool known = dispatch_floating(dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    dequantize_int8_kernel<E><<<blocks, kThreads, 0, stream>>>(codes, scales, zeros, n, group_size,
                                                               static_cast<E*>(out));
  });
  return known ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace fitgrad::cuda
