// The launchers of the int8 group-quantization kernels (cuda/kernels/int8.cu): Q-GaLore's
// asymmetric 8-bit codes with an f32 scale and a u8 zero per group of group_size values
// (tensor/quant/int8.h, Note [Int8 weights]). Plain values, pointers and the stream, as in
// launch.h; each returns its launch's cudaError_t, and a launcher over nothing launches
// nothing. group_size divides n, which the adapter checks.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/kernels/launch.h"
#include "tensor/dtype.h"

namespace fitgrad::cuda {

// codes u8 (n), scales f32 and zeros u8 (n / group_size) from a (n) in `dtype` (f32, bf16 or
// f16); stochastic: element i rounds with the uniform of Philox draw offset + i of seed.
cudaError_t launch_quantize_int8(const void* a, DType dtype, int64_t n, int64_t group_size,
                                 uint8_t* codes, float* scales, uint8_t* zeros, bool stochastic,
                                 uint64_t seed, uint64_t offset, cudaStream_t stream);

// out (n) in `dtype` (f32, bf16 or f16) from codes, scales and zeros.
cudaError_t launch_dequantize_int8(const uint8_t* codes, const float* scales, const uint8_t* zeros,
                                   int64_t n, int64_t group_size, void* out, DType dtype,
                                   cudaStream_t stream);

}  // namespace fitgrad::cuda
