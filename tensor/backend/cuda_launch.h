// The launch arithmetic of the CUDA kernels (cuda/kernels/): grid sizes, tile shapes and
// shared-memory sizes as plain constexpr C++, so that the kernels, the CUDA workspace rules
// (cuda_rules.cpp, which memplan plans with) and the CPU-side tests all compute them from
// one place. Nothing here includes a CUDA header; tests/tensor/backend/cuda_launch_test.cpp
// checks it on a machine without a GPU.
//
// Note [CUDA launch shapes]
//   - Elementwise, copy, fill, the optimizers and the random ops: kCudaThreads threads per
//     block, each thread kCudaItemsPerThread elements, in a grid-stride loop over at most
//     kCudaMaxBlocks blocks.
//   - Reductions (sum, sum_squares): one block per kCudaReduceElements elements, at most 2
//     per SM (cuda_reduce_blocks); each block writes one double partial per kept output
//     into the workspace, and a second pass adds the partials in block order, so the sum is
//     deterministic. A sum that fits one block writes its result directly; a sum of
//     squares always goes through one double of workspace, which the host then reads.
//   - Row kernels (norms, softmax, cross-entropy): one block of cuda_row_threads(n) threads
//     per row.
//   - Norm backward: cuda_norm_partitions blocks, each walking a contiguous range of rows
//     for dw / db into its partials row; a second pass adds the rows in order.
//   - Flash attention has its own tiles (tensor/backend/cuda_flash_launch.h).
#pragma once

#include <algorithm>
#include <cstdint>

#include "tensor/backend/profile.h"

namespace fitgrad::backend {

inline constexpr int kCudaThreads = 256;
inline constexpr int kCudaItemsPerThread = 4;
inline constexpr int64_t kCudaMaxBlocks = int64_t(1) << 16;

constexpr int64_t cuda_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks of a grid-stride elementwise kernel over n elements (>= 1 for n >= 1, 0 for n 0).
constexpr int64_t cuda_elementwise_blocks(int64_t n) {
  return std::min(cuda_ceil_div(n, int64_t(kCudaThreads) * kCudaItemsPerThread), kCudaMaxBlocks);
}

// Blocks of a reduction over n elements on a card with `sms` multiprocessors.
constexpr int64_t cuda_reduce_blocks(int64_t n, int sms) {
  return std::min<int64_t>(cuda_ceil_div(n, kCudaReduceElements), 2 * int64_t(sms));
}

// Threads of a row kernel over rows of n elements: a power of two from 32 (one warp) to
// 1024, about one thread per 4 elements.
constexpr int cuda_row_threads(int64_t n) {
  int threads = 32;
  while (threads < 1024 && int64_t(threads) * 4 < n) threads *= 2;
  return threads;
}

// Row ranges of a norm backward's dw / db partials.
constexpr int64_t cuda_norm_partitions(int64_t rows, int sms) {
  return std::max<int64_t>(1, std::min<int64_t>(2 * int64_t(sms), rows));
}

// Keys of the embedding backward's bitonic sort (Note [CUDA embedding backward]):
// n rounded up to a power of two, which the (n, 2) i64 pairs workspace always holds.
constexpr int64_t cuda_bitonic_keys(int64_t n) {
  int64_t padded = 1;
  while (padded < n) padded *= 2;
  return padded;
}

// The f32 workspace of one svd_basis on a card (Note [GaLore's SVD on a card] in
// cuda/ops/svd_basis.cpp), for the basis side's d = m (left) or n (right), in floats from
// its start: the Gram matrix (d, d) that cuSOLVER's syevd overwrites with its eigenvectors,
// the d eigenvalues, syevd's info word and the non-finite flag (two ints), then syevd's work
// array, planned at LAPACK's documented minimum for ssyevd with eigenvectors, 1 + 6 d + 2 d^2.
struct CudaSvdLayout {
  int64_t d = 0;
  int64_t eigenvalues = 0;  // offset of the d eigenvalues
  int64_t flags = 0;        // offset of syevd's info and the non-finite flag (int32 each)
  int64_t work = 0;         // offset of syevd's work array
  int64_t work_floats = 0;  // its planned length
  int64_t total = 0;        // floats of the whole workspace
};
constexpr CudaSvdLayout cuda_svd_layout(int64_t m, int64_t n, bool left) {
  CudaSvdLayout l;
  l.d = left ? m : n;
  l.eigenvalues = l.d * l.d;
  l.flags = l.eigenvalues + l.d;
  l.work = l.flags + 2;
  l.work_floats = 1 + 6 * l.d + 2 * l.d * l.d;
  l.total = l.work + l.work_floats;
  return l;
}

// Note [cuBLASLt alignment hints]
// cuBLASLt's heuristic is told the alignment of each matrix (MIN_ALIGNMENT_*_BYTES) and then
// picks only kernels whose vector loads that alignment allows. Every matrix of a strided
// batch starts at base + i * stride elements and every row (column, in cuBLASLt's
// column-major view) at a multiple of the leading dimension, so the alignment a kernel can
// count on is the largest power of two, up to 256, dividing the base address, the leading
// dimension in bytes and, with more than one matrix, the batch stride in bytes. The base
// address alone (an odd leading dimension of bf16 values, say) would promise 16-byte loads
// that rows 1, 2, ... do not have.
constexpr uint32_t cuda_operand_alignment(uint64_t base, int64_t ld, int64_t batch,
                                          int64_t batch_stride, int64_t element_bytes) {
  uint32_t a = 256;
  auto fits = [&](uint64_t v) { return v % a == 0; };
  while (a > 1 && !(fits(base) && fits(uint64_t(ld * element_bytes)) &&
                    (batch <= 1 || fits(uint64_t(batch_stride * element_bytes)))))
    a /= 2;
  return a;
}

}  // namespace fitgrad::backend
