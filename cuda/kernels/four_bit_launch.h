// The launchers of the 4-bit kernels (cuda/kernels/four_bit.cu): bitsandbytes' NF4 / FP4
// blockwise quantization, its double quantization of the absmaxes, dequantization, the rows
// of a 4-bit embedding and the fused dequantize-GEMM of a frozen 4-bit linear layer. Plain
// values, pointers and the stream, as in launch.h (Note [No fmt in .cu files] in
// device.cuh); each returns its launches' cudaError_t, and a launcher over nothing launches
// nothing. The layout and the arithmetic are tensor/quant/four_bit.h's: packed byte k holds
// values 2k (high nibble) and 2k + 1, a block of `blocksize` values (the last one partial)
// shares an f32 absmax, and with double quantization absmax[b] = map[nested[b]] *
// absmax2[b / 256] + offset. blocksize is a power of two from 32 to 4096, which the
// adapters check (quant::check_four_bit_blocksize). The grids are
// tensor/backend/cuda_four_bit_launch.h's.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/kernels/launch.h"
#include "tensor/dtype.h"

namespace fitgrad::cuda {

// The code tables the kernels read, filled by the adapter from tensor/quant's own (so they
// are the CPU's values): passed by value as a __grid_constant__ kernel parameter.
struct FourBitTables {
  float values[16];      // the code values of the type (quant::four_bit_values)
  float thresholds[15];  // NF4's (quant::nf4_thresholds); FP4's are its code rule's literals
  float map[256];        // the signed dynamic map (quant::dynamic_map_signed)
};

// packed u8 ((n + 1) / 2) and absmax f32 (ceil(n / blocksize)) from a (n) in `dtype` (f32,
// bf16 or f16).
cudaError_t launch_quantize_4bit(const void* a, DType dtype, int64_t n, int64_t blocksize, bool fp4,
                                 const FourBitTables& tables, uint8_t* packed, float* absmax,
                                 cudaStream_t stream);

// Double quantization of absmax f32 (blocks): offset f32 (1) = their mean, nested u8
// (blocks), absmax2 f32 (ceil(blocks / 256)).
cudaError_t launch_quantize_absmax(const float* absmax, int64_t blocks, const FourBitTables& tables,
                                   uint8_t* nested, float* absmax2, float* offset,
                                   cudaStream_t stream);

// absmax f32 (blocks) from nested u8 (blocks), absmax2 f32 (ceil(blocks / 256)) and offset
// f32 (1), all device memory.
cudaError_t launch_dequantize_absmax(const uint8_t* nested, const float* absmax2,
                                     const float* offset, int64_t blocks,
                                     const FourBitTables& tables, float* absmax,
                                     cudaStream_t stream);

// out (n) in `dtype` (f32, bf16 or f16) from packed and absmax.
cudaError_t launch_dequantize_4bit(const uint8_t* packed, const float* absmax, int64_t n,
                                   int64_t blocksize, const FourBitTables& tables, void* out,
                                   DType dtype, cudaStream_t stream);

// out (n_ids, cols) in `dtype` = the rows `ids` (n_ids, i32 or i64) of the 4-bit (rows,
// cols) tensor packed / absmax; an id outside [0, rows) is recorded in `errors` and its row
// of out is zero (Note [Device error flags] in cuda/error_flags.h).
cudaError_t launch_embedding_4bit(const uint8_t* packed, const float* absmax, int64_t rows,
                                  int64_t cols, int64_t blocksize, const FourBitTables& tables,
                                  const void* ids, DType id_dtype, int64_t n_ids, void* out,
                                  DType dtype, DeviceErrorRecord* errors, cudaStream_t stream);

// The absmaxes of a 4-bit weight: absmax (blocks) itself, or (absmax null) its double
// quantization, read in place.
struct FourBitAbsmax {
  const float* absmax = nullptr;
  const uint8_t* nested = nullptr;  // (blocks)
  const float* absmax2 = nullptr;   // (ceil(blocks / 256))
  const float* offset = nullptr;    // (1)
};

// out (m, rows) f32 = x (m, cols) f32 times W^T, W the 4-bit (rows, cols) weight (Note [4-bit
// linear tiles] in tensor/backend/cuda_four_bit_launch.h). The caller checks that the grid
// fits (ceil(rows / 64) <= 65535).
cudaError_t launch_linear_4bit(const uint8_t* packed, const FourBitAbsmax& absmax, int64_t rows,
                               int64_t cols, int64_t blocksize, const FourBitTables& tables,
                               const float* x, int64_t m, float* out, cudaStream_t stream);

}  // namespace fitgrad::cuda
