// Flash attention on the CPU: forward with an online softmax over key tiles, backward by
// recomputing each probability tile from the saved log-sum-exp. Neither direction holds
// more than one kTileQ x kTileK tile of scores per thread, so memory beyond the inputs and
// outputs is O(1) in the sequence length (see attention.h, attention_tile.h). Work items
// are dealt to threads round-robin (schedule(static, 1)) because under a causal mask a later
// query tile costs more than an early one; each item is computed by one thread and writes
// its own rows, so no result depends on the schedule or the thread count.
//
// Note [Causal alignment]
// With t queries and s keys, query i sees key j iff j <= i + (s - t): the last query sees
// every key, as when decoding the newest tokens against a KV cache holding s >= t
// positions. With t > s the first t - s queries see no key; their output is 0 and their
// lse -inf, and they receive and pass on no gradient (naive attention agrees).
//
// Note [Deterministic attention backward]
// Sharing a key tile between query tiles (and, with grouped-query heads, between the
// query heads of a group) would need atomic or racy adds to accumulate dk and dv in the
// usual one-pass backward. Instead it runs two passes over independent work: pass 1 owns
// one (batch, query head, query tile) and sums dq over key tiles; pass 2 owns one
// (batch, kv head, key tile) and sums dk and dv over the group's query heads and query
// tiles in a fixed order. Recomputing the scores and dp in both passes costs two tile
// products more than the atomic scheme (7 instead of 5 per tile pair), and buys results
// that are bitwise identical run to run, for any thread count.
#include <algorithm>
#include <cmath>
#include <limits>

#include "tensor/cpu/attention.h"
#include "tensor/cpu/attention_tile.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace fitgrad::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int64_t kParallelMin = int64_t(1) << 15;  // elements worth waking a thread team for

int thread_id() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Keys [0, end) are visible to at least one of the queries [q0, q0 + nq).
int64_t key_end(const AttentionDims& dims, bool causal, int64_t q0, int64_t nq) {
  if (!causal) return dims.s;
  return std::clamp<int64_t>(q0 + nq + dims.s - dims.t, 0, dims.s);
}

// Scaled scores of queries [q0, q0 + nq) against keys [j0, j0 + nk) in s, masked.
void masked_scores(const AttentionDims& dims, bool causal, float scale, const float* q_rows,
                   const float* kt, int64_t q0, int64_t nq, int64_t j0, int64_t nk, float* s) {
  tile_scores(nq, dims.d, scale, q_rows, dims.d, kt, s);
  const int64_t offset = dims.s - dims.t;
  if (nk < kTileK || (causal && j0 + nk - 1 > q0 + offset))
    mask_tile(nq, nk, causal, q0, j0, offset, s);
}

}  // namespace

int64_t flash_workspace_floats(int64_t d, bool backward) {
  if (backward) return 2 * d * kTileK + 2 * kTileQ * kTileK;
  return d * kTileK + kTileQ * kTileK + 2 * kTileQ;
}

void flash_attention_forward(const AttentionDims& dims, bool causal, float scale, const float* q,
                             const float* k, const float* v, float* o, float* lse, float* workspace,
                             int threads) {
  const int64_t d = dims.d, group = dims.hq / dims.hkv, q_tiles = ceil_div(dims.t, kTileQ);
  const int64_t items = dims.batch * dims.hq * q_tiles;
  const int64_t per_thread = flash_workspace_floats(d, false);
#pragma omp parallel for schedule(static, 1) num_threads(threads) if (items > 1)
  for (int64_t item = 0; item < items; ++item) {
    const int64_t bh = item / q_tiles, q0 = item % q_tiles * kTileQ;
    const int64_t nq = std::min(kTileQ, dims.t - q0);
    const int64_t kv = (bh / dims.hq) * dims.hkv + bh % dims.hq / group;
    const float* q_rows = q + (bh * dims.t + q0) * d;  // (nq, d)
    const float* k_head = k + kv * dims.s * d;         // (s, d)
    const float* v_head = v + kv * dims.s * d;         // (s, d)
    float* o_rows = o + (bh * dims.t + q0) * d;        // (nq, d), the accumulator
    float* lse_rows = lse + bh * dims.t + q0;          // (nq)
    float* kt = workspace + thread_id() * per_thread;  // (d, kTileK)
    float* s = kt + d * kTileK;                        // (kTileQ, kTileK)
    float* m = s + kTileQ * kTileK;                    // (kTileQ) running max
    float* l = m + kTileQ;                             // (kTileQ) running sum
    std::fill(o_rows, o_rows + nq * d, 0.0f);
    std::fill(m, m + nq, kNegInf);
    std::fill(l, l + nq, 0.0f);
    const int64_t end = key_end(dims, causal, q0, nq);
    for (int64_t j0 = 0; j0 < end; j0 += kTileK) {
      const int64_t nk = std::min(kTileK, end - j0);
      transpose_tile(nk, d, k_head + j0 * d, d, kt);
      masked_scores(dims, causal, scale, q_rows, kt, q0, nq, j0, nk, s);
      online_softmax_tile(nq, d, s, m, l, o_rows, d);
      tile_accumulate(nq, nk, d, s, kTileK, 1, v_head + j0 * d, d, o_rows, d);
    }
    for (int64_t r = 0; r < nq; ++r) {
      float* orow = o_rows + r * d;
      if (l[r] == 0.0f) {  // sees no key (Note [Causal alignment])
        std::fill(orow, orow + d, 0.0f);
        lse_rows[r] = kNegInf;
        continue;
      }
      const float inv = 1.0f / l[r];
      for (int64_t x = 0; x < d; ++x) orow[x] *= inv;
      lse_rows[r] = m[r] + std::log(l[r]);
    }
  }
}

void flash_attention_backward(const AttentionDims& dims, bool causal, float scale,
                              const float* dout, const float* q, const float* k, const float* v,
                              const float* o, const float* lse, float* delta, float* dq, float* dk,
                              float* dv, float* workspace, int threads) {
  const int64_t d = dims.d, group = dims.hq / dims.hkv;
  const int64_t q_tiles = ceil_div(dims.t, kTileQ), k_tiles = ceil_div(dims.s, kTileK);
  const int64_t per_thread = flash_workspace_floats(d, true);
  const int64_t offset = dims.s - dims.t;

  // delta = rowsum(dout * o): (batch, hq, t)
  const int64_t rows = dims.batch * dims.hq * dims.t;
#pragma omp parallel for schedule(static) num_threads(threads) if (rows * d >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    float acc = 0.0f;
    for (int64_t x = 0; x < d; ++x) acc += dout[r * d + x] * o[r * d + x];
    delta[r] = acc;
  }

  // Pass 1: dq for one (batch, query head, query tile) (Note [Deterministic attention backward]).
  const int64_t q_items = dims.batch * dims.hq * q_tiles;
#pragma omp parallel for schedule(static, 1) num_threads(threads) if (q_items > 1)
  for (int64_t item = 0; item < q_items; ++item) {
    const int64_t bh = item / q_tiles, q0 = item % q_tiles * kTileQ;
    const int64_t nq = std::min(kTileQ, dims.t - q0);
    const int64_t kv = (bh / dims.hq) * dims.hkv + bh % dims.hq / group;
    const int64_t row0 = bh * dims.t + q0;
    const float* k_head = k + kv * dims.s * d;         // (s, d)
    const float* v_head = v + kv * dims.s * d;         // (s, d)
    float* dq_rows = dq + row0 * d;                    // (nq, d)
    float* kt = workspace + thread_id() * per_thread;  // (d, kTileK)
    float* vt = kt + d * kTileK;                       // (d, kTileK)
    float* p = vt + d * kTileK;                        // (kTileQ, kTileK)
    float* ds = p + kTileQ * kTileK;                   // (kTileQ, kTileK)
    std::fill(dq_rows, dq_rows + nq * d, 0.0f);
    const int64_t end = key_end(dims, causal, q0, nq);
    for (int64_t j0 = 0; j0 < end; j0 += kTileK) {
      const int64_t nk = std::min(kTileK, end - j0);
      transpose_tile(nk, d, k_head + j0 * d, d, kt);
      transpose_tile(nk, d, v_head + j0 * d, d, vt);
      masked_scores(dims, causal, scale, q + row0 * d, kt, q0, nq, j0, nk, p);
      probs_from_lse(nq, lse + row0, p);
      tile_scores(nq, d, 1.0f, dout + row0 * d, d, vt, ds);  // dp = dout @ v^T
      softmax_grad_tile(nq, p, delta + row0, ds);
      tile_accumulate(nq, nk, d, ds, kTileK, 1, k_head + j0 * d, d, dq_rows, d);
    }
    for (int64_t x = 0; x < nq * d; ++x) dq_rows[x] *= scale;
  }

  // Pass 2: dk and dv for one (batch, kv head, key tile), summing the group's query heads.
  const int64_t k_items = dims.batch * dims.hkv * k_tiles;
#pragma omp parallel for schedule(static, 1) num_threads(threads) if (k_items > 1)
  for (int64_t item = 0; item < k_items; ++item) {
    const int64_t kv = item / k_tiles, j0 = item % k_tiles * kTileK;
    const int64_t nk = std::min(kTileK, dims.s - j0);
    const int64_t b = kv / dims.hkv, h_first = kv % dims.hkv * group;
    const int64_t key0 = kv * dims.s + j0;
    float* dk_rows = dk + key0 * d;                    // (nk, d)
    float* dv_rows = dv + key0 * d;                    // (nk, d)
    float* kt = workspace + thread_id() * per_thread;  // (d, kTileK)
    float* vt = kt + d * kTileK;                       // (d, kTileK)
    float* p = vt + d * kTileK;                        // (kTileQ, kTileK)
    float* ds = p + kTileQ * kTileK;                   // (kTileQ, kTileK)
    transpose_tile(nk, d, k + key0 * d, d, kt);
    transpose_tile(nk, d, v + key0 * d, d, vt);
    std::fill(dk_rows, dk_rows + nk * d, 0.0f);
    std::fill(dv_rows, dv_rows + nk * d, 0.0f);
    // The first query that sees key j0.
    const int64_t q_first = causal ? std::max<int64_t>(0, j0 - offset) : 0;
    for (int64_t h = h_first; h < h_first + group; ++h) {
      const int64_t bh = b * dims.hq + h;
      for (int64_t q0 = q_first / kTileQ * kTileQ; q0 < dims.t; q0 += kTileQ) {
        const int64_t nq = std::min(kTileQ, dims.t - q0);
        const int64_t row0 = bh * dims.t + q0;
        masked_scores(dims, causal, scale, q + row0 * d, kt, q0, nq, j0, nk, p);
        probs_from_lse(nq, lse + row0, p);
        tile_accumulate(nk, nq, d, p, 1, kTileK, dout + row0 * d, d, dv_rows, d);  // p^T dout
        tile_scores(nq, d, 1.0f, dout + row0 * d, d, vt, ds);                      // dout v^T
        softmax_grad_tile(nq, p, delta + row0, ds);
        tile_accumulate(nk, nq, d, ds, 1, kTileK, q + row0 * d, d, dk_rows, d);  // ds^T q
      }
    }
    for (int64_t x = 0; x < nk * d; ++x) dk_rows[x] *= scale;
  }
}

}  // namespace fitgrad::cpu
