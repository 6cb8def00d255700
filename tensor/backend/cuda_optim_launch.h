// The launch arithmetic of the CUDA optimizer kernels (cuda/kernels/optim.cu) as plain
// constexpr C++, beside tensor/backend/cuda_launch.h's: Adam8bit's grid, sum of squares'
// partial count within its workspace, Adafactor's column-sum tiling and workspace layout, and
// the 8-bit code search the Adam8bit kernel runs. Nothing here includes a CUDA header, so
// tests/tensor/backend/cuda_optim_launch_test.cpp checks all of it (the code search against
// tensor/quant/dynamic_map.h's CodeSearch) on a machine without a GPU.
//
// Note [CUDA optimizer launch shapes]
//   - AdamW, SGD, Adam8bit's 32-bit kernel, scale_ and Adafactor's elementwise EMAs: the
//     grid-stride elementwise shape of Note [CUDA launch shapes] (cuda_elementwise_blocks).
//   - Adam8bit's 8-bit kernel: one block of kCudaAdam8bitThreads threads per 256-element
//     absmax block, one thread per element, the block's absmaxes a block max. The grid
//     strides over the absmax blocks with at most kCudaAdam8bitMaxBlocks blocks, because
//     each block first stages the two 256-code maps into shared memory, and that cost is
//     paid once per block rather than once per absmax block.
//   - sum_squares: cuda_reduce_blocks partials, but never more than the workspace holds
//     (cuda_sum_squares_blocks), then one thread adds them in block order.
//   - Adafactor: row kernels (one block of cuda_row_threads(cols) threads per line of cols)
//     for its row sums, sums of squares and update; column sums in tiles of
//     kCudaAdafactorColTile columns by kCudaAdafactorColWarps warps, each warp walking every
//     kCudaAdafactorColWarps-th row of a chunk of rows (cuda_adafactor_layout).
//   - APOLLO: row kernels over the low-rank gradient's rows (when they are the channels) and
//     over the parameter's rows, one thread per channel otherwise, single blocks for the
//     tensor-wise scale and the limiter, the elementwise shape for the update (the phases of
//     cuda/kernels/apollo.cu; its workspace is Note [APOLLO's workspace]).
#pragma once

#include <algorithm>
#include <cstdint>

#include "tensor/backend/cuda_dynamic_code.h"
#include "tensor/backend/cuda_launch.h"

namespace fitgrad::backend {

// ---- Adam8bit ----

// One thread per element of an absmax block (kAdam8bitBlock in kernel_args.h, which the
// adapter asserts equal).
inline constexpr int kCudaAdam8bitThreads = 256;
inline constexpr int64_t kCudaAdam8bitMaxBlocks = 4096;

// Blocks of the 8-bit kernel over n elements (0 for n 0).
constexpr int64_t cuda_adam8bit_blocks(int64_t n) {
  return std::min(cuda_ceil_div(n, kCudaAdam8bitThreads), kCudaAdam8bitMaxBlocks);
}

// The 8-bit kernel codes its states with cuda_dynamic_code (tensor/backend/cuda_dynamic_code.h).

// ---- sum of squares ----

// Partials of a sum of squares over n elements on a card with `sms` multiprocessors, in a
// workspace of `workspace_doubles` doubles: cuda_reduce_blocks, at least 1, at most the
// workspace (the front-end sized it for its profile's SM count); 0 for n 0 (no launch).
constexpr int64_t cuda_sum_squares_blocks(int64_t n, int sms, int64_t workspace_doubles) {
  if (n == 0) return 0;
  return std::max<int64_t>(1, std::min(cuda_reduce_blocks(n, sms), workspace_doubles));
}

// ---- Adafactor ----

inline constexpr int kCudaAdafactorColTile = 32;          // columns per block: one per lane
inline constexpr int kCudaAdafactorColWarps = 32;         // row groups per block (1024 threads)
inline constexpr int64_t kCudaAdafactorChunkRows = 2048;  // rows per chunk, when it fits

// Blocks of a row kernel over `lines` lines (a grid-stride loop over them beyond).
constexpr int64_t cuda_line_blocks(int64_t lines) { return std::min(lines, kCudaMaxBlocks); }

// Note [Adafactor's workspace on the device]
// The workspace is adafactor_workspace_doubles(batch, rows, cols) doubles (kernel_args.h):
// [0, lines) | [lines, lines + batch * cols) | batch means, with lines = batch * rows.
//   - The column sums of g^2 of a tall parameter are split into `chunks` chunks of
//     chunk_rows rows, so that more blocks share them: a partial per (batch, chunk, column),
//     (batch, chunks, cols) doubles at col_partials, added in chunk order by the column EMA.
//     With one chunk they take the second region; with more, the first, which holds them
//     because chunks <= rows / cols (the first region is free until the row sums start).
//   - The row sums (of g^2, then of p^2, then of u^2) take the first region, one per line;
//     the sum of p^2 over the parameter then waits in the second region's first double
//     (p_total) while the row sums of u^2 are added into the first double (u_total).
//   - The f32 mean row factor of each batch, as a double, at row_means.
// Every sum has a fixed order for a given shape, so the update is the same bit for bit on
// every run.
struct CudaAdafactorLayout {
  int64_t lines = 0, chunks = 1, chunk_rows = 0, col_tiles = 0;
  int64_t col_partials = 0, p_total = 0, u_total = 0, row_means = 0;  // offsets, in doubles
};

// Chunks of rows of the column sums: about kCudaAdafactorChunkRows rows each, at most
// rows / cols of them (so their partials fit the row slots), at least 1.
constexpr int64_t cuda_adafactor_col_chunks(int64_t rows, int64_t cols) {
  return std::max<int64_t>(1, std::min(cuda_ceil_div(rows, kCudaAdafactorChunkRows), rows / cols));
}

// The layout of a (batch, rows, cols) parameter (all >= 1; (1, 1, n) when unfactored).
constexpr CudaAdafactorLayout cuda_adafactor_layout(int64_t batch, int64_t rows, int64_t cols) {
  CudaAdafactorLayout l;
  l.lines = batch * rows;
  l.chunks = cuda_adafactor_col_chunks(rows, cols);
  l.chunk_rows = cuda_ceil_div(rows, l.chunks);
  l.col_tiles = batch * l.chunks * cuda_ceil_div(cols, kCudaAdafactorColTile);
  l.col_partials = l.chunks > 1 ? 0 : l.lines;
  l.p_total = l.lines;
  l.u_total = 0;
  l.row_means = l.lines + batch * cols;
  return l;
}

}  // namespace fitgrad::backend
