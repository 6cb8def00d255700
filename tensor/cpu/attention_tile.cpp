// Flash-attention tile kernels (see attention_tile.h and Note [Attention tile kernels]).
#include "tensor/cpu/attention_tile.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tensor/cpu/vec.h"

namespace fitgrad::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A 64-float panel row is kPanelVecs vectors (tensor/cpu/vec.h).
constexpr int kPanelVecs = 4;
constexpr int64_t kPanel = kVecWidth * kPanelVecs;
static_assert(kTileK == kPanel, "a score tile row is one panel");

// acc(R, 64) += sum_k w(i, k) * b_k[0:64] for k < n, with w(i, k) = w[i * w_row + k * w_col]
// and b_k = b + k * ldb: R x 4 accumulators stay in registers while each b_k is loaded once.
template <int R>
[[gnu::always_inline]] inline void panel_product(int64_t n, const float* w, int64_t w_row,
                                                 int64_t w_col, const float* b, int64_t ldb,
                                                 Vec (&acc)[R][kPanelVecs]) {
  for (int64_t k = 0; k < n; ++k) {
    const float* bk = b + k * ldb;
    const Vec b0 = load(bk), b1 = load(bk + kVecWidth), b2 = load(bk + 2 * kVecWidth),
              b3 = load(bk + 3 * kVecWidth);
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      const float wi = w[i * w_row + k * w_col];
      acc[i][0] += wi * b0;
      acc[i][1] += wi * b1;
      acc[i][2] += wi * b2;
      acc[i][3] += wi * b3;
    }
  }
}

// s(r.. r+R, 64) = scale * a(r.. r+R, d) @ bt(d, 64).
template <int R>
[[gnu::always_inline]] inline void score_rows(int64_t r, int64_t d, float scale, const float* a,
                                              int64_t lda, const float* bt, float* s) {
  Vec acc[R][kPanelVecs] = {};
  panel_product<R>(d, a + r * lda, lda, 1, bt, kTileK, acc);
  for (int i = 0; i < R; ++i)
    for (int u = 0; u < kPanelVecs; ++u)
      store(s + (r + i) * kTileK + u * kVecWidth, scale * acc[i][u]);
}

// c(r.. r+R, x0.. x0+64) += p(r.. r+R, n) @ b(n, x0.. x0+64).
template <int R>
[[gnu::always_inline]] inline void accumulate_rows(int64_t r, int64_t x0, int64_t n, const float* p,
                                                   int64_t p_row, int64_t p_col, const float* b,
                                                   int64_t ldb, float* c, int64_t ldc) {
  Vec acc[R][kPanelVecs];
  for (int i = 0; i < R; ++i)
    for (int u = 0; u < kPanelVecs; ++u) acc[i][u] = load(c + (r + i) * ldc + x0 + u * kVecWidth);
  panel_product<R>(n, p + r * p_row, p_row, p_col, b + x0, ldb, acc);
  for (int i = 0; i < R; ++i)
    for (int u = 0; u < kPanelVecs; ++u) store(c + (r + i) * ldc + x0 + u * kVecWidth, acc[i][u]);
}

}  // namespace

FITGRAD_SIMD_CLONES
void transpose_tile(int64_t nk, int64_t d, const float* __restrict k, int64_t ldk,
                    float* __restrict kt) {
  for (int64_t x = 0; x < d; ++x) {
    float* row = kt + x * kTileK;
    for (int64_t j = 0; j < nk; ++j) row[j] = k[j * ldk + x];
    for (int64_t j = nk; j < kTileK; ++j) row[j] = 0.0f;
  }
}

FITGRAD_SIMD_CLONES
void tile_scores(int64_t nq, int64_t d, float scale, const float* __restrict a, int64_t lda,
                 const float* __restrict bt, float* __restrict s) {
  int64_t r = 0;
  for (; r + 4 <= nq; r += 4) score_rows<4>(r, d, scale, a, lda, bt, s);
  for (; r < nq; ++r) score_rows<1>(r, d, scale, a, lda, bt, s);
}

FITGRAD_SIMD_CLONES
void tile_accumulate(int64_t m, int64_t n, int64_t d, const float* __restrict p, int64_t p_row,
                     int64_t p_col, const float* __restrict b, int64_t ldb, float* __restrict c,
                     int64_t ldc) {
  const int64_t panels_end = d / kPanel * kPanel;
  for (int64_t x0 = 0; x0 < panels_end; x0 += kPanel) {
    int64_t r = 0;
    for (; r + 4 <= m; r += 4) accumulate_rows<4>(r, x0, n, p, p_row, p_col, b, ldb, c, ldc);
    for (; r < m; ++r) accumulate_rows<1>(r, x0, n, p, p_row, p_col, b, ldb, c, ldc);
  }
  // The columns past the last full panel (head dims that are not a multiple of 64).
  if (panels_end == d) return;
  for (int64_t r = 0; r < m; ++r) {
    float* cr = c + r * ldc;
    for (int64_t j = 0; j < n; ++j) {
      const float w = p[r * p_row + j * p_col];
      const float* bj = b + j * ldb;
      for (int64_t x = panels_end; x < d; ++x) cr[x] += w * bj[x];
    }
  }
}

void mask_tile(int64_t nq, int64_t nk, bool causal, int64_t q0, int64_t j0, int64_t offset,
               float* s) {
  for (int64_t r = 0; r < nq; ++r) {
    // Keys j0 + j with j < visible are seen by query q0 + r.
    int64_t visible = nk;
    if (causal) visible = std::clamp<int64_t>(q0 + r + offset - j0 + 1, 0, nk);
    std::fill(s + r * kTileK + visible, s + (r + 1) * kTileK, kNegInf);
  }
}

FITGRAD_SIMD_CLONES
void online_softmax_tile(int64_t nq, int64_t d, float* __restrict s, float* __restrict m,
                         float* __restrict l, float* __restrict o, int64_t ldo) {
  for (int64_t r = 0; r < nq; ++r) {
    float* sr = s + r * kTileK;
    Vec x[kPanelVecs];
    for (int u = 0; u < kPanelVecs; ++u) x[u] = load(sr + u * kVecWidth);
    // The row max, NaN if any score is NaN: a NaN must reach o and lse, not vanish in a max.
    Vec vmax = x[0];
    for (int u = 1; u < kPanelVecs; ++u) vmax = ((x[u] > vmax) | (x[u] != x[u])) ? x[u] : vmax;
    float m_new = m[r];
    for (int i = 0; i < kVecWidth; ++i)
      if (vmax[i] > m_new || std::isnan(vmax[i])) m_new = vmax[i];
    if (m_new == kNegInf) {  // no key of this row is visible yet
      std::fill(sr, sr + kTileK, 0.0f);
      continue;
    }
    // The sum in a fixed order: lane-wise over the four vectors, then over the lanes.
    Vec vsum = splat(0.0f);
    for (int u = 0; u < kPanelVecs; ++u) {
      x[u] = fast_exp(x[u] - m_new);
      store(sr + u * kVecWidth, x[u]);
      vsum += x[u];
    }
    float sum = 0.0f;
    for (int i = 0; i < kVecWidth; ++i) sum += vsum[i];
    const float alpha = std::exp(m[r] - m_new);  // 0 on the first visible tile (m = -inf)
    l[r] = l[r] * alpha + sum;
    m[r] = m_new;
    if (alpha != 1.0f) {
      float* orow = o + r * ldo;
      for (int64_t i = 0; i < d; ++i) orow[i] *= alpha;
    }
  }
}

FITGRAD_SIMD_CLONES
void probs_from_lse(int64_t nq, const float* __restrict lse, float* __restrict s) {
  for (int64_t r = 0; r < nq; ++r) {
    float* sr = s + r * kTileK;
    const float lr = lse[r];
    if (lr == kNegInf) {
      std::fill(sr, sr + kTileK, 0.0f);
      continue;
    }
    for (int u = 0; u < kPanelVecs; ++u)
      store(sr + u * kVecWidth, fast_exp(load(sr + u * kVecWidth) - lr));
  }
}

FITGRAD_SIMD_CLONES
void softmax_grad_tile(int64_t nq, const float* __restrict p, const float* __restrict delta,
                       float* __restrict dp) {
  for (int64_t r = 0; r < nq; ++r) {
    const float dr = delta[r];
    for (int64_t j = 0; j < kTileK; ++j)
      dp[r * kTileK + j] = p[r * kTileK + j] * (dp[r * kTileK + j] - dr);
  }
}

}  // namespace fitgrad::cpu
