// Flash-attention tile kernels (see attention_tile.h and Note [Attention tile kernels]).
#include "tensor/cpu/attention_tile.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "tensor/cpu/vec.h"

namespace fitgrad::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A 64-float panel row is kPanelVecs vectors (tensor/cpu/vec.h).
constexpr int kPanelVecs = 4;
constexpr int64_t kPanel = kVecWidth * kPanelVecs;
static_assert(kTileK == kPanel, "a score tile row is one panel");

// The register blocking of the two products per ISA level, in the level's native vector
// (Native in vec.h; Note [Attention tile kernels]): kRows rows by kVecs vectors of
// accumulators, plus kVecs vectors of the right operand's row and a broadcast, fit the
// vector registers. AVX-512: 4 x 4 zmm of 32 (a 64-float panel row at once). AVX2: 4 x 2 ymm
// of 16, the panel in four strips of 16 columns. SSE2: 4 x 2 xmm of 16, eight strips of 8.
// The 16-float Vec is native only on AVX-512; on AVX2 GCC kept arrays of it in memory
// (every accumulator a load and a store per multiply-add).
template <CpuIsa kIsa>
struct Blocking {
  using V = typename Native<kIsa>::F;
  static constexpr int kRows = 4, kVecs = kIsa >= CpuIsa::avx512 ? 4 : 2;
};

// acc(R, C vectors) += sum_k w(i, k) * b_k[0 : C vectors] for k < n, with w(i, k) =
// w[i * w_row + k * w_col] and b_k = b + k * ldb: the R x C accumulators stay in registers
// while each b_k is loaded once.
template <class V, int R, int C>
[[gnu::always_inline]] inline void panel_product(int64_t n, const float* w, int64_t w_row,
                                                 int64_t w_col, const float* b, int64_t ldb,
                                                 V (&acc)[R][C]) {
  for (int64_t k = 0; k < n; ++k) {
    const float* bk = b + k * ldb;
    V bv[C];
#pragma GCC unroll 4
    for (int u = 0; u < C; ++u) bv[u] = load<V>(bk + u * kLanes<V>);
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      const float wi = w[i * w_row + k * w_col];
#pragma GCC unroll 4
      for (int u = 0; u < C; ++u) acc[i][u] += wi * bv[u];
    }
  }
}

// s(r.. r+R, x0.. x0 + C vectors) = scale * a(r.. r+R, d) @ bt(d, the same columns).
template <class V, int R, int C>
[[gnu::always_inline]] inline void score_rows(int64_t r, int64_t x0, int64_t d, float scale,
                                              const float* a, int64_t lda, const float* bt,
                                              float* s) {
  V acc[R][C] = {};
  panel_product<V, R, C>(d, a + r * lda, lda, 1, bt + x0, kTileK, acc);
  for (int i = 0; i < R; ++i)
    for (int u = 0; u < C; ++u) store(s + (r + i) * kTileK + x0 + u * kLanes<V>, scale * acc[i][u]);
}

// c(r.. r+R, x0.. x0 + C vectors) += p(r.. r+R, n) @ b(n, the same columns).
template <class V, int R, int C>
[[gnu::always_inline]] inline void accumulate_rows(int64_t r, int64_t x0, int64_t n, const float* p,
                                                   int64_t p_row, int64_t p_col, const float* b,
                                                   int64_t ldb, float* c, int64_t ldc) {
  V acc[R][C];
  for (int i = 0; i < R; ++i)
    for (int u = 0; u < C; ++u) acc[i][u] = load<V>(c + (r + i) * ldc + x0 + u * kLanes<V>);
  panel_product<V, R, C>(n, p + r * p_row, p_row, p_col, b + x0, ldb, acc);
  for (int i = 0; i < R; ++i)
    for (int u = 0; u < C; ++u) store(c + (r + i) * ldc + x0 + u * kLanes<V>, acc[i][u]);
}

// Blocks of W keys x W head dims go through registers (Note [In-register transpose] in vec.h);
// head dims past the last whole block are copied one by one.
template <CpuIsa kIsa>
[[gnu::always_inline]] inline void transpose_tile_body(int64_t nk, int64_t d,
                                                       const float* __restrict k, int64_t ldk,
                                                       float* __restrict kt) {
  using V = typename Native<kIsa>::F;
  constexpr int W = kLanes<V>;
  int64_t x0 = 0;
  for (; x0 + W <= d; x0 += W)
    for (int64_t j0 = 0; j0 < kTileK; j0 += W) {
      V r[W];
      for (int i = 0; i < W; ++i)
        r[i] = j0 + i < nk ? load<V>(k + (j0 + i) * ldk + x0) : splat<V>(0.0f);
      transpose_block(r);
      for (int i = 0; i < W; ++i) store(kt + (x0 + i) * kTileK + j0, r[i]);
    }
  for (int64_t x = x0; x < d; ++x) {
    float* row = kt + x * kTileK;
    for (int64_t j = 0; j < nk; ++j) row[j] = k[j * ldk + x];
    for (int64_t j = nk; j < kTileK; ++j) row[j] = 0.0f;
  }
}

template <CpuIsa kIsa>
[[gnu::always_inline]] inline void tile_scores_body(int64_t nq, int64_t d, float scale,
                                                    const float* __restrict a, int64_t lda,
                                                    const float* __restrict bt,
                                                    float* __restrict s) {
  using V = typename Blocking<kIsa>::V;
  constexpr int R = Blocking<kIsa>::kRows, C = Blocking<kIsa>::kVecs;
  for (int64_t x0 = 0; x0 < kPanel; x0 += C * kLanes<V>) {
    int64_t r = 0;
    for (; r + R <= nq; r += R) score_rows<V, R, C>(r, x0, d, scale, a, lda, bt, s);
    for (; r < nq; ++r) score_rows<V, 1, C>(r, x0, d, scale, a, lda, bt, s);
  }
}

template <CpuIsa kIsa>
[[gnu::always_inline]] inline void tile_accumulate_body(int64_t m, int64_t n, int64_t d,
                                                        const float* __restrict p, int64_t p_row,
                                                        int64_t p_col, const float* __restrict b,
                                                        int64_t ldb, float* __restrict c,
                                                        int64_t ldc) {
  using V = typename Blocking<kIsa>::V;
  constexpr int R = Blocking<kIsa>::kRows, C = Blocking<kIsa>::kVecs;
  constexpr int64_t kStrip = C * kLanes<V>;
  int64_t x0 = 0;
  for (; x0 + kStrip <= d; x0 += kStrip) {
    int64_t r = 0;
    for (; r + R <= m; r += R) accumulate_rows<V, R, C>(r, x0, n, p, p_row, p_col, b, ldb, c, ldc);
    for (; r < m; ++r) accumulate_rows<V, 1, C>(r, x0, n, p, p_row, p_col, b, ldb, c, ldc);
  }
  // Head dims that are not a multiple of the strip (32 on AVX-512, say): single vectors,
  // then single columns. Every element is the same sum in the same order either way.
  for (; x0 + kLanes<V> <= d; x0 += kLanes<V>) {
    int64_t r = 0;
    for (; r + R <= m; r += R) accumulate_rows<V, R, 1>(r, x0, n, p, p_row, p_col, b, ldb, c, ldc);
    for (; r < m; ++r) accumulate_rows<V, 1, 1>(r, x0, n, p, p_row, p_col, b, ldb, c, ldc);
  }
  if (x0 == d) return;
  for (int64_t r = 0; r < m; ++r) {
    float* cr = c + r * ldc;
    for (int64_t j = 0; j < n; ++j) {
      const float w = p[r * p_row + j * p_col];
      const float* bj = b + j * ldb;
      for (int64_t x = x0; x < d; ++x) cr[x] += w * bj[x];
    }
  }
}

// max(a, b), b when either is NaN: one vmaxps. A select on a comparison mask (to keep NaN)
// came out of GCC 12 as lane-by-lane scalar code here, so NaN is tracked as the note below says.
template <class V>
[[gnu::always_inline]] inline V max_of(const V& a, const V& b) {
  return a > b ? a : b;
}

// Note [Row reductions in blocks of rows]
// The softmax needs each row's max and sum over its 64 scores. Reduced one row at a time, a
// row's vector of lane-wise partials is read out lane by lane, W scalar steps per row, which
// took as long as one of the tile's two products. Instead W rows' partial vectors are
// transposed in registers (Note [In-register transpose] in vec.h), after which W - 1
// lane-wise steps give the W rows' results in one vector. Lane i still sums row i's partials
// in lane order 0, 1, ..., W - 1, as the scalar loop did, so the sums are unchanged.
//
// A NaN score must reach o and lse. The max passes NaN over (max_of), and the NaN reaches l
// and o through its exp instead (exp(NaN - m) is NaN); m then stays finite and l is NaN. A
// row whose visible scores are all NaN has no max at all (-inf, like a row that sees no key
// yet): only such rows are scanned, and a NaN found makes the row's max NaN.
template <CpuIsa kIsa>
[[gnu::always_inline]] inline void online_softmax_tile_body(int64_t nq, int64_t d,
                                                            float* __restrict s,
                                                            float* __restrict m,
                                                            float* __restrict l,
                                                            float* __restrict o, int64_t ldo) {
  using V = typename Native<kIsa>::F;
  constexpr int W = kLanes<V>, kN = int(kTileK) / W;
  for (int64_t r0 = 0; r0 < nq; r0 += W) {
    const int rows = int(std::min<int64_t>(W, nq - r0));
    // Each row's max (Note [Row reductions in blocks of rows]).
    V part[W];
    for (int i = 0; i < W; ++i) {
      part[i] = splat<V>(kNegInf);
      if (i >= rows) continue;
      const float* sr = s + (r0 + i) * kTileK;
      for (int u = 0; u < kN; ++u) part[i] = max_of(load<V>(sr + u * W), part[i]);
    }
    transpose_block(part);
    V row_max = part[0];
    for (int i = 1; i < W; ++i) row_max = max_of(part[i], row_max);
    const V m_old = load_partial<V>(m + r0, rows, kNegInf);
    float m_new[W];
    store(m_new, max_of(row_max, m_old));
    for (int i = 0; i < rows; ++i) {
      if (m_new[i] != kNegInf) continue;
      const float* sr = s + (r0 + i) * kTileK;
      if (std::any_of(sr, sr + kTileK, [](float x) { return std::isnan(x); }))
        m_new[i] = std::numeric_limits<float>::quiet_NaN();
    }
    // exp(m_old - m_new): 0 on a row's first visible tile (m_old = -inf), 1 when its max
    // holds; NaN on rows that see no key yet, which take neither.
    float alpha[W];
    store(alpha, fast_exp(m_old - load<V>(m_new)));
    // p = exp(s - m_new) and each row's sum.
    for (int i = 0; i < W; ++i) {
      part[i] = splat<V>(0.0f);
      if (i >= rows) continue;
      float* sr = s + (r0 + i) * kTileK;
      const float mi = m_new[i];
      if (mi == kNegInf) {  // no key of this row is visible yet
        std::fill(sr, sr + kTileK, 0.0f);
        continue;
      }
      for (int u = 0; u < kN; ++u) {
        const V x = fast_exp(load<V>(sr + u * W) - mi);
        store(sr + u * W, x);
        part[i] += x;
      }
    }
    transpose_block(part);
    V row_sum = part[0];
    for (int i = 1; i < W; ++i) row_sum += part[i];
    float sum[W];
    store(sum, row_sum);
    for (int i = 0; i < rows; ++i) {
      const int64_t r = r0 + i;
      if (m_new[i] == kNegInf) continue;
      l[r] = l[r] * alpha[i] + sum[i];
      m[r] = m_new[i];
      if (alpha[i] != 1.0f) {
        float* orow = o + r * ldo;
        for (int64_t x = 0; x < d; ++x) orow[x] *= alpha[i];
      }
    }
  }
}

template <CpuIsa kIsa>
[[gnu::always_inline]] inline void probs_from_lse_body(int64_t nq, const float* __restrict lse,
                                                       float* __restrict s) {
  using V = typename Native<kIsa>::F;
  constexpr int W = kLanes<V>;
  for (int64_t r = 0; r < nq; ++r) {
    float* sr = s + r * kTileK;
    const float lr = lse[r];
    if (lr == kNegInf) {
      std::fill(sr, sr + kTileK, 0.0f);
      continue;
    }
    for (int u = 0; u < int(kTileK) / W; ++u) store(sr + u * W, fast_exp(load<V>(sr + u * W) - lr));
  }
}

template <CpuIsa kIsa>
[[gnu::always_inline]] inline void softmax_grad_tile_body(int64_t nq, const float* __restrict p,
                                                          const float* __restrict delta,
                                                          float* __restrict dp) {
  for (int64_t r = 0; r < nq; ++r) {
    const float dr = delta[r];
    for (int64_t j = 0; j < kTileK; ++j)
      dp[r * kTileK + j] = p[r * kTileK + j] * (dp[r * kTileK + j] - dr);
  }
}

}  // namespace

FITGRAD_ISA_KERNEL(void, transpose_tile,
                   (int64_t nk, int64_t d, const float* k, int64_t ldk, float* kt),
                   (nk, d, k, ldk, kt))
FITGRAD_ISA_KERNEL(void, tile_scores,
                   (int64_t nq, int64_t d, float scale, const float* a, int64_t lda,
                    const float* bt, float* s),
                   (nq, d, scale, a, lda, bt, s))
FITGRAD_ISA_KERNEL(void, tile_accumulate,
                   (int64_t m, int64_t n, int64_t d, const float* p, int64_t p_row, int64_t p_col,
                    const float* b, int64_t ldb, float* c, int64_t ldc),
                   (m, n, d, p, p_row, p_col, b, ldb, c, ldc))
FITGRAD_ISA_KERNEL(void, online_softmax_tile,
                   (int64_t nq, int64_t d, float* s, float* m, float* l, float* o, int64_t ldo),
                   (nq, d, s, m, l, o, ldo))
FITGRAD_ISA_KERNEL(void, probs_from_lse, (int64_t nq, const float* lse, float* s), (nq, lse, s))
FITGRAD_ISA_KERNEL(void, softmax_grad_tile,
                   (int64_t nq, const float* p, const float* delta, float* dp), (nq, p, delta, dp))

void mask_tile(int64_t nq, int64_t nk, const backend::AttentionMask& mask, int64_t t,
               int64_t s_keys, int64_t q0, int64_t j0, float* s) {
  for (int64_t r = 0; r < nq; ++r) {
    // Keys j0 + j with begin <= j < end are seen by query q0 + r.
    const int64_t end = std::clamp<int64_t>(mask.key_end(t, s_keys, q0 + r) - j0, 0, nk);
    const int64_t begin = std::clamp<int64_t>(mask.key_begin(t, s_keys, q0 + r) - j0, 0, end);
    std::fill(s + r * kTileK, s + r * kTileK + begin, kNegInf);
    std::fill(s + r * kTileK + end, s + (r + 1) * kTileK, kNegInf);
  }
}

}  // namespace fitgrad::cpu
