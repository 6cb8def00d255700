// The tile-level building blocks of flash attention (attention_flash.cpp): two small
// fp32 products, the causal/padding mask, the online-softmax update and the recomputation
// of probabilities from a saved log-sum-exp. One tile is at most kTileQ query rows by
// kTileK keys; every score tile is stored row-major with row stride kTileK, whatever its
// true width, and columns past the true width are masked to -inf.
//
// Note [Attention tile kernels]
// The tiles are far too small for gemm_f32 to pay off (its threading and packing are
// built for large products, and the callers already run one tile per OpenMP thread), so
// the two products are register-blocked loops over 64-float panels: on AVX-512, 4 rows x
// 64 columns of accumulators stay in registers (GCC/Clang vector extensions, 16 floats per
// vector) while each row of the right operand is loaded once; plain auto-vectorised loops
// kept their accumulators on the stack and ran at about half the speed. AVX2 has half the
// vector registers at half the width, so there 4 x 64 accumulators (32 ymm) spilled and the
// score tiles took 42% of the demo's step on an AVX2-only EPYC; its variant blocks 4 rows x
// 16 columns and walks the panel in four strips (SSE2: 4 x 8, eight strips), and its
// softmax and exp run on 8-float vectors (vec.h's Native). The library is built for
// baseline x86-64 unless FITGRAD_NATIVE is on, so every kernel is compiled per ISA level and
// runs the level in force (Note [Kernel ISA variants] in vec.h).
// exp() is our own vectorised polynomial (fast_exp in tensor/cpu/vec.h, ~1 ulp): libm's
// expf is a scalar call and would dominate a tile. Every result depends only on its
// tile's inputs, never on the thread count; sums run in a fixed order.
#pragma once

#include <cstdint>

#include "tensor/backend/attention_mask.h"

namespace fitgrad::cpu {

inline constexpr int64_t kTileQ = 64;  // query rows per tile
inline constexpr int64_t kTileK = 64;  // keys per tile (the row stride of score tiles)

// kt(d, kTileK) = k(nk, d)^T, columns nk.. kTileK zero. k rows have stride ldk.
void transpose_tile(int64_t nk, int64_t d, const float* k, int64_t ldk, float* kt);

// s(nq, kTileK) = scale * a(nq, d) @ bt(d, kTileK). a rows have stride lda.
void tile_scores(int64_t nq, int64_t d, float scale, const float* a, int64_t lda, const float* bt,
                 float* s);

// c(m, d) += p(m, n) @ b(n, d), element (r, j) of p at p[r * p_row + j * p_col] (so a
// transposed tile is p_row = 1, p_col = kTileK). b and c rows have strides ldb and ldc.
void tile_accumulate(int64_t m, int64_t n, int64_t d, const float* p, int64_t p_row, int64_t p_col,
                     const float* b, int64_t ldb, float* c, int64_t ldc);

// Sets s(r, j) = -inf where key j0 + j is invisible to query q0 + r of t against s_keys
// keys: j >= nk (padding), or outside the mask's keys for that query (Note [Causal alignment]
// in attention_flash.cpp, Note [Sliding-window attention] in tensor/backend/attention_mask.h).
void mask_tile(int64_t nq, int64_t nk, const backend::AttentionMask& mask, int64_t t,
               int64_t s_keys, int64_t q0, int64_t j0, float* s);

// One online-softmax step over a scaled, masked score tile s(nq, kTileK): the running max
// m and sum l (nq) absorb the tile, the accumulator o(nq, d) (row stride ldo) is rescaled
// by exp(m_old - m_new), and s is overwritten with p = exp(s - m_new). m starts at -inf,
// l and o at 0.
void online_softmax_tile(int64_t nq, int64_t d, float* s, float* m, float* l, float* o,
                         int64_t ldo);

// s(nq, kTileK) := exp(s - lse_r), 0 where s is -inf or lse_r is -inf (a query that sees
// no key).
void probs_from_lse(int64_t nq, const float* lse, float* s);

// ds(nq, kTileK) := p * (dp - delta_r), written over dp.
void softmax_grad_tile(int64_t nq, const float* p, const float* delta, float* dp);

}  // namespace fitgrad::cpu
