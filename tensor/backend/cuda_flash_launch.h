// The launch arithmetic of the cuda attention kernels (cuda/kernels/attention_*.cu) as plain
// constexpr C++: which path a call takes, the tile shapes and shared-memory bytes of each
// path and head dim, the grids and how a block finds its (batch-head, tile), the key tiles a
// causal query tile visits and the query tiles a key tile visits, the lane arithmetic of
// the tensor-core fragments, and the grids of naive attention. The kernels compute all of
// it from here, and tests/tensor/backend/cuda_flash_launch_test.cpp checks it on a machine
// without a GPU (including the fragment algebra, by emulating ldmatrix and mma).
//
// Note [CUDA flash attention]
// FlashAttention-2 on the cuda backend, two paths (cuda_flash_path):
//   - mma (bf16/f16, head dim <= 128 and a multiple of 8, 16-byte aligned operands, sm_80+):
//     warp-level tensor-core mma.sync.m16n8k16 with f32 accumulators; head dims are padded
//     to 64 or 128 (CudaFlashMmaConfig) with zero columns, which change no score;
//   - simt (f32, or any dtype that the mma path does not take, head dim <= 256): plain f32
//     FMA on tiles widened to f32 in shared memory, one key per lane (CudaFlashSimtConfig).
// Forward: one block per (query tile, batch-head); each warp owns 16 (mma) or 8 (simt) query
// rows, key/value tiles stream through shared memory (double-buffered with cp.async on the
// mma path), the running max and sum are f32, and causal key tiles past the diagonal are
// never loaded (cuda_flash_forward_key_tiles). Blocks are numbered heavy tile first
// (cuda_flash_forward_block): under a causal mask the last query tile sees the most keys.
// Backward (deterministic, Note [CUDA attention accumulation] in attention_flash_backward.cu): a
// first kernel writes delta = rowsum(dout * o); then two kernels that each own their
// outputs and recompute p = exp(s - lse) from q, k and lse. The dK/dV kernel runs one block
// per (key tile, batch x kv head), which walks the query heads of its group and, for each,
// the query tiles that see its keys (cuda_flash_backward_first_query_tile): dP = dO V^T,
// dS = P (dP - delta), dV += P^T dO, dK += dS^T Q in registers. The dQ kernel runs one
// block per (query tile, batch x query head), numbered as the forward's, which walks the
// key tiles its queries see: dQ += dS K in registers. No f32 workspace.
#pragma once

#include <algorithm>
#include <cstdint>

#include "tensor/backend/attention_mask.h"
#include "tensor/backend/cuda_launch.h"
#include "tensor/dtype.h"

namespace fitgrad::backend {

inline constexpr int64_t kCudaFlashMaxHeadDim = 256;

enum class CudaFlashPath : int { mma, simt };

// The path of one call: dtype, head dim, whether every operand is 16-byte aligned, and the
// device's compute capability major (8 = sm_80).
constexpr CudaFlashPath cuda_flash_path(DType dtype, int64_t d, bool aligned16, int sm_major) {
  const bool half = dtype == DType::bf16 || dtype == DType::f16;
  return half && d <= 128 && d % 8 == 0 && aligned16 && sm_major >= 8 ? CudaFlashPath::mma
                                                                      : CudaFlashPath::simt;
}

// ---- tiles of the mma path ----

// The padded head dim of the mma path's kernels.
constexpr int cuda_flash_mma_head_dim(int64_t d) { return d <= 64 ? 64 : 128; }

// Tiles of the mma path for padded head dim HeadDim (64 or 128). Operands are 2 bytes.
// Shared-memory rows are padded by 8 elements (16 bytes), so the 8 rows one ldmatrix reads
// fall in 8 distinct groups of 4 banks.
template <int HeadDim>
struct CudaFlashMmaConfig {
  static_assert(HeadDim == 64 || HeadDim == 128, "the mma kernels take head dims 64 and 128");
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kLd = HeadDim + 8;  // row stride of q, k, v, dout tiles (elements)
  // forward: 16 query rows per warp, key tiles of kBc, double-buffered
  static constexpr int kBr = 16 * kWarps;
  static constexpr int kBc = 64;
  static constexpr int64_t kForwardSmem = int64_t(kBr + 2 * 2 * kBc) * kLd * 2;
  // backward dK/dV: 16 keys per warp, query tiles of kBwdBr (smaller at 128, for registers
  // and shared memory), double-buffered with their lse and delta
  static constexpr int kBwdBc = 16 * kWarps;
  static constexpr int kBwdBr = HeadDim == 64 ? 64 : 32;
  static constexpr int64_t kBackwardSmem =
      int64_t(2 * kBwdBc + 2 * 2 * kBwdBr) * kLd * 2 + 2 * 2 * kBwdBr * 4;
  // backward dQ: 16 query rows per warp as in the forward, key tiles of kDqBc (smaller at
  // 128, for registers), double-buffered; q and dout stay in shared memory
  static constexpr int kDqBr = 16 * kWarps;
  static constexpr int kDqBc = HeadDim == 64 ? 64 : 32;
  static constexpr int64_t kDqSmem = int64_t(2 * kDqBr + 2 * 2 * kDqBc) * kLd * 2;
};

// ---- tiles of the simt path ----

// Tiles of the simt path: kRows query rows per warp, a key per lane; head dims in chunks of
// 32 columns (a column per lane), the kernels instantiated for 1, 2, 4 or 8 chunks.
struct CudaFlashSimtConfig {
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kRows = 8;                    // query rows per warp (forward, backward)
  static constexpr int kBr = kRows * kWarps;         // query rows per tile
  static constexpr int kBc = 32;                     // keys per tile: one per lane
  static constexpr int kKeysPerWarp = kBc / kWarps;  // backward: dk and dv rows per warp
};

// Column chunks (of 32) a simt kernel is instantiated for: 1, 2, 4 or 8.
constexpr int cuda_flash_simt_chunks(int64_t d) {
  return d <= 32 ? 1 : d <= 64 ? 2 : d <= 128 ? 4 : 8;
}
// Shared memory of the simt kernels (f32 tiles; k and v rows padded by one float so that
// lanes reading different rows hit different banks).
constexpr int64_t cuda_flash_simt_forward_smem(int64_t d) {
  using C = CudaFlashSimtConfig;
  return (C::kBr * d + C::kBc * (d + 1) + C::kBc * d) * 4;
}
// Backward dK/dV: k, v (kBc, d + 1), q, dout (kBr, d), P, dS (kBr, kBc + 1), lse, delta.
constexpr int64_t cuda_flash_simt_backward_smem(int64_t d) {
  using C = CudaFlashSimtConfig;
  return (2 * C::kBc * (d + 1) + 2 * C::kBr * d + 2 * C::kBr * (C::kBc + 1) + 2 * C::kBr) * 4;
}
// Backward dQ: q, dout (kBr, d), k, v (kBc, d + 1).
constexpr int64_t cuda_flash_simt_dq_smem(int64_t d) {
  using C = CudaFlashSimtConfig;
  return (2 * C::kBr * d + 2 * C::kBc * (d + 1)) * 4;
}

// Shared memory of one block of a call's path; the backward's is its larger kernel's.
constexpr int64_t cuda_flash_smem_bytes(CudaFlashPath path, int64_t d, bool backward) {
  if (path == CudaFlashPath::simt)
    return backward ? std::max(cuda_flash_simt_backward_smem(d), cuda_flash_simt_dq_smem(d))
                    : cuda_flash_simt_forward_smem(d);
  if (cuda_flash_mma_head_dim(d) == 64)
    return backward
               ? std::max(CudaFlashMmaConfig<64>::kBackwardSmem, CudaFlashMmaConfig<64>::kDqSmem)
               : CudaFlashMmaConfig<64>::kForwardSmem;
  return backward
             ? std::max(CudaFlashMmaConfig<128>::kBackwardSmem, CudaFlashMmaConfig<128>::kDqSmem)
             : CudaFlashMmaConfig<128>::kForwardSmem;
}

// Forward query tile rows and backward key tile rows of a call's path.
constexpr int cuda_flash_query_tile(CudaFlashPath path, int64_t d) {
  if (path == CudaFlashPath::simt) return CudaFlashSimtConfig::kBr;
  return cuda_flash_mma_head_dim(d) == 64 ? CudaFlashMmaConfig<64>::kBr
                                          : CudaFlashMmaConfig<128>::kBr;
}
constexpr int cuda_flash_key_tile(CudaFlashPath path, int64_t d) {
  if (path == CudaFlashPath::simt) return CudaFlashSimtConfig::kBc;
  return cuda_flash_mma_head_dim(d) == 64 ? CudaFlashMmaConfig<64>::kBwdBc
                                          : CudaFlashMmaConfig<128>::kBwdBc;
}

// ---- masked tiles (Note [Causal alignment] in tensor/cpu/attention_flash.cpp, Note
// [Sliding-window attention] in attention_mask.h) ----

// Tiles [first, end) of a range.
struct CudaTileRange {
  int64_t first = 0;
  int64_t end = 0;
};
// The key tiles of bc keys that the query tile of br rows starting at q0 visits: from the
// one holding the first row's lowest visible key to the one holding the last row's highest.
constexpr CudaTileRange cuda_flash_key_tiles(int64_t t, int64_t s, const AttentionMask& mask,
                                             int64_t q0, int64_t br, int64_t bc) {
  const int64_t last = std::min(q0 + br, t) - 1;
  return {mask.key_begin(t, s, q0) / bc, cuda_ceil_div(mask.key_end(t, s, last), bc)};
}
// The query tiles of br rows that see any key of the key tile of bc keys starting at j0;
// the backward walks them in order.
constexpr CudaTileRange cuda_flash_query_tiles(int64_t t, int64_t s, const AttentionMask& mask,
                                               int64_t j0, int64_t bc, int64_t br) {
  const int64_t last = std::min(j0 + bc, s) - 1;
  return {mask.first_query(t, s, j0) / br, cuda_ceil_div(mask.query_end(t, s, last), br)};
}
// Whether some key of [j0, j0 + bc) is hidden from some query of [q0, q0 + br): past the
// sequence's end, past a row's diagonal, or below its window. Other tiles skip the
// per-element test.
constexpr bool cuda_flash_tile_masked(int64_t t, int64_t s, const AttentionMask& mask, int64_t q0,
                                      int64_t br, int64_t j0, int64_t bc) {
  return j0 + bc > s || mask.key_end(t, s, q0) < j0 + bc || mask.key_begin(t, s, q0 + br - 1) > j0;
}
// Whether query i does not see key j (a key past s included).
constexpr bool cuda_flash_hidden(int64_t t, int64_t s, const AttentionMask& mask, int64_t i,
                                 int64_t j) {
  return j >= s || j >= mask.key_end(t, s, i) || j < mask.key_begin(t, s, i);
}

// ---- grids ----

// Where a block works: its batch-head (b * Hq + h) and its query (forward) or key
// (backward) tile.
struct CudaFlashBlock {
  int64_t bh = 0;
  int64_t tile = 0;
};

// Forward: one block per (query tile, batch-head), a 1-D grid. Blocks are numbered tile
// rank major, and under a causal mask rank 0 is the last query tile, so the blocks that
// see the most keys start first.
constexpr int64_t cuda_flash_forward_blocks(int64_t bh_count, int64_t t, int64_t br) {
  return bh_count * cuda_ceil_div(t, br);
}
constexpr CudaFlashBlock cuda_flash_forward_block(int64_t block, int64_t bh_count, int64_t q_tiles,
                                                  bool causal) {
  const int64_t rank = block / bh_count;
  return {block % bh_count, causal ? q_tiles - 1 - rank : rank};
}
// Backward dK/dV: one block per (key tile, batch x kv head); the first key tiles are the
// ones most queries see. The dQ kernel's grid is the forward's, over its own query tiles.
constexpr int64_t cuda_flash_backward_blocks(int64_t bkv_count, int64_t s, int64_t bc) {
  return bkv_count * cuda_ceil_div(s, bc);
}
constexpr CudaFlashBlock cuda_flash_backward_block(int64_t block, int64_t bkv_count) {
  return {block % bkv_count, block / bkv_count};
}
// The kv batch-head that query batch-head bh reads (grouped-query attention).
constexpr int64_t cuda_flash_kv_head(int64_t bh, int64_t hq, int64_t hkv) {
  return bh / hq * hkv + bh % hq / (hq / hkv);
}
// The query batch-head h (0 <= h < hq / hkv) of kv batch-head bkv's group: a dK/dV block
// walks h = 0, 1, .. in order.
constexpr int64_t cuda_flash_group_head(int64_t bkv, int64_t hq, int64_t hkv, int64_t h) {
  return bkv * (hq / hkv) + h;
}
// Blocks of the delta kernel: a warp per row, kCudaFlashRowWarps rows per block.
inline constexpr int kCudaFlashRowWarps = 8;
constexpr int64_t cuda_flash_row_blocks(int64_t rows) {
  return cuda_ceil_div(rows, kCudaFlashRowWarps);
}
// The largest 1-D grid.
inline constexpr int64_t kCudaMaxGridX = (int64_t(1) << 31) - 1;

// ---- the tensor-core fragments ----
//
// Note [mma fragments]
// mma.sync.aligned.m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16"): lane l has
// group g = l / 4 and thread-in-group t = l % 4. A (16 x 16) is four 32-bit registers of
// two 16-bit elements, lower index in the low half: register r holds row g + 8 (r % 2),
// columns 2t + 8 (r / 2) and the next one. B (16 x 8) is two registers: register r holds
// rows 2t + 8 r and the next one, column g. C (16 x 8, f32) is four floats: c[i] is row
// g + 8 (i / 2), column 2t + i % 2. So the C fragments of n-tiles 2k and 2k + 1 of a score
// tile, rounded to 16 bits in pairs, are the A fragment of k-block k of the next product
// (cuda_mma_a_from_c): P never leaves registers.
// ldmatrix.x4 reads four 8x8 16-bit matrices, matrix m from the row addresses of lanes
// 8m .. 8m + 7; lane l receives in register m matrix m's row l / 4, columns 2 (l % 4) and the
// next (.trans: column l / 4, rows 2 (l % 4) and the next). Two address patterns, each a
// (row, column) offset of lane l inside a 16 x 16 tile of a row-major shared array, cover
// every operand:
//   X: row l % 16, column 8 (l / 16): an A fragment (non-transposed), or, .trans, the B
//      fragments of n-tiles 0 and 1 of a tile stored (k, n) (v in P V, dout in P^T dO, k in dS K);
//   Y: row l % 8 + 8 (l / 16), column 8 (l / 8 % 2): the B fragments of n-tiles 0 and 1 of
//      a tile stored (n, k) (k in Q K^T, v in dO V^T), or, .trans, an A fragment of a tile
//      stored (k, m).
struct CudaFragmentIndex {
  int row = 0;
  int col = 0;
};
constexpr CudaFragmentIndex cuda_mma_a_index(int lane, int element) {  // element 0..7
  return {lane / 4 + 8 * (element / 2 % 2), 2 * (lane % 4) + element % 2 + 8 * (element / 4)};
}
constexpr CudaFragmentIndex cuda_mma_b_index(int lane, int element) {  // element 0..3: (k, n)
  return {2 * (lane % 4) + element % 2 + 8 * (element / 2), lane / 4};
}
constexpr CudaFragmentIndex cuda_mma_c_index(int lane, int element) {  // element 0..3
  return {lane / 4 + 8 * (element / 2), 2 * (lane % 4) + element % 2};
}
constexpr CudaFragmentIndex cuda_ldmatrix_x(int lane) { return {lane % 16, 8 * (lane / 16)}; }
constexpr CudaFragmentIndex cuda_ldmatrix_y(int lane) {
  return {lane % 8 + 8 * (lane / 16), 8 * (lane / 8 % 2)};
}
// Register r of the A fragment of k-block k is C pair r % 2 (floats 2 (r % 2) and the
// next) of n-tile 2k + r / 2.
struct CudaAFromC {
  int tile = 0;  // n-tile offset from 2k
  int pair = 0;
};
constexpr CudaAFromC cuda_mma_a_from_c(int reg) { return {reg / 2, reg % 2}; }

// ---- naive attention ----

// Note [CUDA naive attention]
// Naive attention is the reference path: its products are one strided batched SIMT GEMM
// (kCudaNaiveTile square tiles through shared memory, an output per thread, a 1-D grid of
// batch x row tiles x column tiles), and its softmax and softmax-gradient rows a warp per
// row, kCudaFlashRowWarps rows per block.
inline constexpr int kCudaNaiveTile = 16;
constexpr int64_t cuda_naive_gemm_blocks(int64_t batch, int64_t m, int64_t n) {
  return batch * cuda_ceil_div(m, kCudaNaiveTile) * cuda_ceil_div(n, kCudaNaiveTile);
}
// The (batch, row tile, column tile) of a GEMM block.
struct CudaNaiveBlock {
  int64_t batch = 0;
  int64_t row_tile = 0;
  int64_t col_tile = 0;
};
constexpr CudaNaiveBlock cuda_naive_gemm_block(int64_t block, int64_t m, int64_t n) {
  const int64_t col_tiles = cuda_ceil_div(n, kCudaNaiveTile);
  const int64_t row_tiles = cuda_ceil_div(m, kCudaNaiveTile);
  return {block / (row_tiles * col_tiles), block / col_tiles % row_tiles, block % col_tiles};
}
// The keys [begin, end) a query row i of t sees among s.
constexpr CudaTileRange cuda_naive_visible(int64_t t, int64_t s, const AttentionMask& mask,
                                           int64_t i) {
  const int64_t end = mask.key_end(t, s, i);
  return {std::min(mask.key_begin(t, s, i), end), end};
}

}  // namespace fitgrad::backend
