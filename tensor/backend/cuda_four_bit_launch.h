// The launch arithmetic of the CUDA 4-bit kernels (cuda/kernels/four_bit.cu: quantize_4bit,
// dequantize_4bit, embedding_4bit, linear_4bit) and the per-value rules they apply, as plain
// constexpr C++ with no CUDA header, so that the kernels call them on the device (the cuda
// target compiles with --expt-relaxed-constexpr) and
// tests/tensor/backend/cuda_four_bit_launch_test.cpp checks them on a machine without a GPU:
// the grids and tiles against independent values, the code rules against tensor/quant's.
//
// Note [CUDA 4-bit launch shapes]
//   - quantize_4bit: one warp per quantization block, kFourBitWarpsPerBlock warps per CUDA
//     block, in a grid-stride loop over the quantization blocks; the warp's lanes take the
//     absmax in a shuffle tree (a max, so the order does not matter) and then code the
//     block's bytes, a byte (two values) per lane at a time.
//   - Double quantization's mean: one CUDA block; kFourBitMeanChunk absmaxes at a time are
//     staged in shared memory and thread 0 adds them in index order in f64, the CPU's order,
//     so the offset has the CPU's bits. Then one CUDA block of kNestedBlocksize threads per
//     nested group, a thread per absmax.
//   - dequantize_absmax, dequantize_4bit (a thread per packed byte) and embedding_4bit (a
//     thread per output value): elementwise grids (cuda_elementwise_blocks).
//   - linear_4bit: Note [4-bit linear tiles].
//
// Note [4-bit linear tiles]
// out (m, rows) = x (m, cols) W^T, W (rows, cols) 4-bit: one CUDA block of
// kLinear4bitThreads threads per kLinear4bitBM x kLinear4bitBN output tile, grid
// ceil(m / BM) x ceil(rows / BN) (x over x's rows, y over W's rows). A K-loop walks the
// columns kLinear4bitBK at a time: each step stages an f32 tile of x and a tile of W decoded
// from its nibbles, both transposed (k-major, padded rows) in shared memory, and each thread
// accumulates its TM x TN outputs in registers. The sums follow four_bit_matvec's (Note
// [Four-bit matvec] in tensor/cpu/four_bit_matvec.cpp), so results differ from the CPU's
// only in the order of the f32 sums:
//   - cols a multiple of the blocksize (aligned): BK divides every blocksize, so a K tile
//     lies inside one quantization block of each weight row (cuda_linear_4bit_block). The
//     W tile holds the code values; a block's sum of code * x is scaled by its absmax into
//     the output, total = fma(acc, absmax, total), at the block's last tile;
//   - otherwise blocks straddle rows: the W tile holds each value's code * absmax (one f32
//     product) and the output adds (code * absmax) * x, one rounding each, as the CPU's
//     scalar loop does.
#pragma once

#include <cstdint>

#include "tensor/backend/cuda_dynamic_code.h"
#include "tensor/backend/cuda_launch.h"
#include "tensor/quant/four_bit.h"

namespace fitgrad::backend {

// ---- quantize and dequantize ----

inline constexpr int kCudaWarp = 32;
inline constexpr int kFourBitWarpsPerBlock = kCudaThreads / kCudaWarp;

// Blocks of quantize_4bit over n values in quantization blocks of `blocksize`.
constexpr int64_t cuda_quantize_4bit_blocks(int64_t n, int64_t blocksize) {
  return std::min(cuda_ceil_div(cuda_ceil_div(n, blocksize), kFourBitWarpsPerBlock),
                  kCudaMaxBlocks);
}

// Absmaxes that double quantization's mean stages in shared memory at a time.
inline constexpr int kFourBitMeanChunk = 2048;
// Blocks of double quantization's codes: one per nested group of kNestedBlocksize absmaxes,
// each of kNestedBlocksize threads.
inline constexpr int kFourBitNestedThreads = int(quant::kNestedBlocksize);
constexpr int64_t cuda_nested_groups(int64_t blocks) {
  return cuda_ceil_div(blocks, quant::kNestedBlocksize);
}
static_assert(kFourBitNestedThreads % kCudaWarp == 0 && kFourBitNestedThreads <= 1024);

// Blocks of dequantize_4bit over n values: a thread per packed byte.
constexpr int64_t cuda_dequantize_4bit_blocks(int64_t n) {
  return cuda_elementwise_blocks((n + 1) / 2);
}

// ---- linear_4bit (Note [4-bit linear tiles]) ----

inline constexpr int kLinear4bitBM = 64;  // rows of x per tile
inline constexpr int kLinear4bitBN = 64;  // rows of W (output columns) per tile
inline constexpr int kLinear4bitBK = 32;  // columns per K step
inline constexpr int kLinear4bitTM = 4;   // outputs per thread along m
inline constexpr int kLinear4bitTN = 4;   // outputs per thread along rows
inline constexpr int kLinear4bitPad = 4;  // floats after each shared tile row (float4 reads)
inline constexpr int kLinear4bitThreads =
    (kLinear4bitBM / kLinear4bitTM) * (kLinear4bitBN / kLinear4bitTN);
// The one-block-per-tile rule needs BK to divide the smallest blocksize (32).
static_assert(kLinear4bitBK <= 32 && 32 % kLinear4bitBK == 0);
static_assert(kLinear4bitBM % kLinear4bitTM == 0 && kLinear4bitBN % kLinear4bitTN == 0);
static_assert(kLinear4bitTM == 4 && kLinear4bitTN == 4, "the kernel reads float4s");
static_assert(kLinear4bitPad % 4 == 0, "shared rows stay 16-byte aligned");
static_assert((kLinear4bitBM * kLinear4bitBK) % kLinear4bitThreads == 0 &&
              (kLinear4bitBN * kLinear4bitBK) % kLinear4bitThreads == 0);

// The most blocks CUDA allows along a grid's y.
inline constexpr int64_t kCudaMaxGridY = 65535;

struct CudaGrid2 {
  int64_t x = 0, y = 0;
};
constexpr CudaGrid2 cuda_linear_4bit_grid(int64_t m, int64_t rows) {
  return {cuda_ceil_div(m, kLinear4bitBM), cuda_ceil_div(rows, kLinear4bitBN)};
}

// The kernel's static shared memory: the x and W tiles (k-major, padded), the tile rows'
// absmaxes, the 16 code values and the 256 values of the signed dynamic map.
inline constexpr int kFourBitCodes = 16;
constexpr int64_t cuda_linear_4bit_shared_bytes() {
  return int64_t(sizeof(float)) * (kLinear4bitBK * (kLinear4bitBM + kLinear4bitPad) +
                                   kLinear4bitBK * (kLinear4bitBN + kLinear4bitPad) +
                                   kLinear4bitBN + kFourBitCodes + kDynamicMapCodes);
}
static_assert(cuda_linear_4bit_shared_bytes() <= 48 * 1024, "static shared memory limit");

// The aligned path: every quantization block lies in one weight row.
constexpr bool cuda_linear_4bit_aligned(int64_t cols, int64_t blocksize) {
  return cols % blocksize == 0;
}
// Aligned: the quantization block of weight row o that holds the K tile starting at k0, and
// whether that tile is the block's last.
constexpr int64_t cuda_linear_4bit_block(int64_t o, int64_t k0, int64_t cols, int64_t blocksize) {
  return o * (cols / blocksize) + k0 / blocksize;
}
constexpr bool cuda_linear_4bit_block_ends(int64_t k0, int64_t blocksize) {
  return (k0 + kLinear4bitBK) % blocksize == 0;
}

// ---- the per-value rules ----

// The 4-bit code of flat value i in its byte: the first value (even i) in the high nibble.
constexpr uint8_t cuda_nibble(uint8_t byte, int64_t i) {
  return i % 2 == 0 ? uint8_t(byte >> 4) : uint8_t(byte & 0x0F);
}

// quant::nf4_code over the 15 thresholds (quant::nf4_thresholds): the number of thresholds
// below x, so x on a threshold takes the lower code and a NaN x code 0.
constexpr uint8_t cuda_nf4_code(const float* thresholds, float x) {
  int code = 0;
  for (int k = 0; k < 15; ++k) code += int(x > thresholds[k]);
  return uint8_t(code);
}

// quant::fp4_code: bitsandbytes' decision tree on |x|, with the CPU's literals.
constexpr uint8_t cuda_fp4_code(float x) {
  const int sign = x < 0.0f ? 8 : 0;
  const float y = x < 0.0f ? -x : x;  // |x| for the compares (a NaN stays NaN: code 0)
  int m;
  if (y > 0.29166667f)
    m = y > 0.583333f ? (y > 0.8333333f ? 3 : 2) : (y > 0.4166667f ? 5 : 4);
  else if (y > 0.0859375f)
    m = y > 0.20833333f ? 7 : 6;
  else
    m = y > 0.00260417f ? 1 : 0;
  return uint8_t(m + sign);
}

// Double quantization codes its nested absmaxes with cuda_dynamic_code
// (tensor/backend/cuda_dynamic_code.h).

}  // namespace fitgrad::backend
