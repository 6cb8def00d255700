// Flash attention on the CPU: forward with an online softmax over key tiles, backward by
// recomputing each probability tile from the saved log-sum-exp. Neither direction holds
// more than one kTileQ x kTileK tile of scores per thread, so memory beyond the inputs and
// outputs is O(1) in the sequence length (see attention.h, attention_tile.h). Each work item
// is computed by one thread and writes its own rows, so no result depends on the schedule or
// the thread count.
//
// Note [Costliest tiles first]
// Under a causal mask a query tile costs as many key tiles as it sees: 1, 2, ..., n. Dealt
// round-robin in that order (schedule(static, 1)), at T = 256 (n = 4) one of two threads got
// the tiles costing 2 and 4 of every head, the other 1 and 3: 6 against 4, and it waited.
// So items are dealt on demand (schedule(dynamic, 1)) with the costliest first: the forward
// and the dq pass walk query tiles from the last, the dk/dv pass key tiles from the first
// (the one every query sees), and the cheapest items fill the gaps at the end.
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
//
// Note [Soft-capped scores]
// Gemma 2 caps each scaled score s at c tanh(s / c) before the softmax (the mask's softcap).
// The forward applies it to the tile's scores before masking. The backward recomputes the
// capped scores the same way, and the gradient of a capped score becomes the raw score's by
// the factor 1 - tanh^2, where tanh = (log p + lse) / c is read back from the probability
// (a probability that underflowed to 0 has a zero gradient anyway). Dropout on capped
// scores is refused (ops::flash_attention), since the dropped probabilities would not give
// the cap back.
//
// Note [Staged attention tiles]
// bf16 and f16 operands are read tile by tile: each thread converts the query, key, value
// and dout rows of the tile it works on into f32 rows of its own workspace, and keeps its
// o, dq, dk or dv rows in f32 there until the tile is done, when they are rounded once into
// the output. So no f32 copy of a whole input exists, and the extra workspace is a few
// (64, d) tiles per thread (flash_workspace_floats(d, backward, true)). The arithmetic is
// the f32 kernel's, on the same f32 values, so a bf16 result is the f32 result on the
// widened inputs, rounded once. f32 operands are used in place.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "tensor/convert.h"
#include "tensor/cpu/attention.h"
#include "tensor/cpu/attention_amx.h"
#include "tensor/cpu/attention_dropout.h"
#include "tensor/cpu/attention_tile.h"
#include "tensor/cpu/stage.h"

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

// Keys [begin, end) are visible to at least one of the queries [q0, q0 + nq): the window of
// the first reaches lowest, the last query sees furthest.
int64_t key_begin(const AttentionDims& dims, const backend::AttentionMask& mask, int64_t q0) {
  return mask.key_begin(dims.t, dims.s, q0);
}
int64_t key_end(const AttentionDims& dims, const backend::AttentionMask& mask, int64_t q0,
                int64_t nq) {
  return mask.key_end(dims.t, dims.s, q0 + nq - 1);
}

// Masks the scores s of queries [q0, q0 + nq) against keys [j0, j0 + nk): a tile that every
// query sees whole is left alone.
void mask_scores(const AttentionDims& dims, const backend::AttentionMask& mask, int64_t q0,
                 int64_t nq, int64_t j0, int64_t nk, float* s) {
  if (nk < kTileK || mask.key_end(dims.t, dims.s, q0) < j0 + nk ||
      mask.key_begin(dims.t, dims.s, q0 + nq - 1) > j0)
    mask_tile(nq, nk, mask, dims.t, dims.s, q0, j0, s);
}

// s(nq, kTileK) := cap tanh(s / cap) (Note [Soft-capped scores]).
void softcap_tile(int64_t nq, double cap, float* s) {
  const float c = float(cap), inv = float(1.0 / cap);
  for (int64_t x = 0; x < nq * kTileK; ++x) s[x] = c * std::tanh(s[x] * inv);
}

// ds(nq, kTileK) *= 1 - tanh^2 of each capped score, read back from p and the rows' lse.
void softcap_grad_tile(int64_t nq, double cap, const float* p, const float* lse, float* ds) {
  const float inv = float(1.0 / cap);
  for (int64_t r = 0; r < nq; ++r)
    for (int64_t j = 0; j < kTileK; ++j) {
      const float pr = p[r * kTileK + j];
      if (pr <= 0.0f) continue;
      const float t = (std::log(pr) + lse[r]) * inv;
      ds[r * kTileK + j] *= 1.0f - t * t;
    }
}

// Scaled (and soft-capped) scores of queries [q0, q0 + nq) against keys [j0, j0 + nk) in s,
// masked.
void masked_scores(const AttentionDims& dims, const backend::AttentionMask& mask, float scale,
                   const float* q_rows, const float* kt, int64_t q0, int64_t nq, int64_t j0,
                   int64_t nk, float* s) {
  tile_scores(nq, dims.d, scale, q_rows, dims.d, kt, s);
  if (mask.softcap > 0) softcap_tile(nq, mask.softcap, s);
  mask_scores(dims, mask, q0, nq, j0, nk, s);
}

// o's rows divided by the softmax sums l, and lse = m + log l (Note [Causal alignment] for a
// query that sees no key).
void finish_rows(int64_t nq, int64_t d, const float* m, const float* l, float* o_rows,
                 float* lse_rows) {
  for (int64_t r = 0; r < nq; ++r) {
    float* orow = o_rows + r * d;
    if (l[r] == 0.0f) {
      std::fill(orow, orow + d, 0.0f);
      lse_rows[r] = kNegInf;
      continue;
    }
    const float inv = 1.0f / l[r];
    for (int64_t x = 0; x < d; ++x) orow[x] *= inv;
    lse_rows[r] = m[r] + std::log(l[r]);
  }
}

// Whether the forward of E runs its products on AMX tiles (Note [AMX attention tiles]).
template <class E>
bool amx_forward(int64_t d) {
  if constexpr (std::is_same_v<E, BFloat16>) return amx_attention_usable(d);
  return false;
}

// The f32 tiles one thread stages bf16/f16 operands through: forward q rows, k or v rows
// and the o accumulator; backward q and dout rows, the dq accumulator, and k and v rows
// (pass 2 reuses the last two as its dk and dv accumulators once they are transposed).
int64_t staging_floats(int64_t d, bool backward) {
  return backward ? 3 * kTileQ * d + 2 * kTileK * d : 2 * kTileQ * d + kTileK * d;
}

}  // namespace

int64_t flash_workspace_floats(int64_t d, bool backward, bool staged) {
  const int64_t tiles =
      backward ? 2 * d * kTileK + 2 * kTileQ * kTileK : d * kTileK + kTileQ * kTileK + 2 * kTileQ;
  return tiles + (staged ? staging_floats(d, backward) : 0);
}

template <class E>
void flash_attention_forward(const AttentionDims& dims, const backend::AttentionMask& all_rows,
                             float scale, const AttentionDropout& dropout, const E* q, const E* k,
                             const E* v, E* o, float* lse, float* workspace, int threads) {
  const int64_t d = dims.d, group = dims.hq / dims.hkv, q_tiles = ceil_div(dims.t, kTileQ);
  const int64_t items = dims.batch * dims.hq * q_tiles;
  const int64_t per_thread = flash_workspace_floats(d, false, kStaged<E>);
  const bool amx = amx_forward<E>(d);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (items > 1)
  for (int64_t item = 0; item < items; ++item) {
    // Note [Costliest tiles first]: the last query tiles of every head, then the ones before.
    const int64_t bh = item % (dims.batch * dims.hq);
    const int64_t q0 = (q_tiles - 1 - item / (dims.batch * dims.hq)) * kTileQ;
    const int64_t nq = std::min(kTileQ, dims.t - q0);
    const int64_t kv = (bh / dims.hq) * dims.hkv + bh % dims.hq / group;
    const backend::AttentionMask mask = all_rows.row(bh / dims.hq, dims.t);
    const E* k_head = k + kv * dims.s * d;             // (s, d)
    const E* v_head = v + kv * dims.s * d;             // (s, d)
    float* kt = workspace + thread_id() * per_thread;  // (d, kTileK)
    float* s = kt + d * kTileK;                        // (kTileQ, kTileK)
    float* m = s + kTileQ * kTileK;                    // (kTileQ) running max
    float* l = m + kTileQ;                             // (kTileQ) running sum
    float* q_buf = l + kTileQ;                         // (kTileQ, d) when staged
    float* o_buf = q_buf + kTileQ * d;                 // (kTileQ, d) when staged
    float* kv_buf = o_buf + kTileQ * d;                // (kTileK, d) when staged
    const E* q_tile = q + (bh * dims.t + q0) * d;      // (nq, d)
    E* o_out = o + (bh * dims.t + q0) * d;             // (nq, d)
    float* o_rows = accumulator(o_out, o_buf);         // (nq, d); (kTileQ, d) when staged
    float* lse_rows = lse + bh * dims.t + q0;          // (nq)
    std::fill(o_rows, o_rows + nq * d, 0.0f);
    std::fill(m, m + nq, kNegInf);
    std::fill(l, l + nq, 0.0f);
    const int64_t begin = key_begin(dims, mask, q0) / kTileK * kTileK;
    const int64_t end = key_end(dims, mask, q0, nq);
    if constexpr (std::is_same_v<E, BFloat16>) {
      if (amx) {
        // Note [AMX attention tiles]: the f32 tiles' space holds the packed operands: k's in
        // kt, v's after it, q's short last tile padded in q_buf, p in bf16 in kv_buf.
        auto* kpack = reinterpret_cast<uint32_t*>(kt);   // (d / 2, kTileK)
        uint32_t* vpack = kpack + d / 2 * kTileK;        // (kTileK / 2, d)
        auto* pb = reinterpret_cast<BFloat16*>(kv_buf);  // (kTileQ, kTileK)
        const BFloat16* q_amx = q_tile;
        if (nq % 16 != 0) {
          auto* padded = reinterpret_cast<BFloat16*>(q_buf);  // (round_up(nq, 16), d)
          std::copy(q_tile, q_tile + nq * d, padded);
          std::fill(padded + nq * d, padded + (nq + 15) / 16 * 16 * d, BFloat16());
          q_amx = padded;
        }
        amx_tiles_begin();
        for (int64_t j0 = begin; j0 < end; j0 += kTileK) {
          const int64_t nk = std::min(kTileK, end - j0);
          amx_scores(nq, nk, d, scale, q_amx, k_head + j0 * d, kpack, s);
          if (mask.softcap > 0) softcap_tile(nq, mask.softcap, s);
          mask_scores(dims, mask, q0, nq, j0, nk, s);
          online_softmax_tile(nq, d, s, m, l, o_rows, d);
          if (dropout.p > 0) dropout_tile(nq, nk, tile_dropout(dims, dropout, bh, q0, j0), s);
          amx_accumulate(nq, nk, d, s, v_head + j0 * d, vpack, pb, o_rows);
        }
        amx_tiles_end();
        finish_rows(nq, d, m, l, o_rows, lse_rows);
        store_rows(o_rows, nq * d, o_out);
        continue;
      }
    }
    const float* q_rows = as_f32(q_tile, nq * d, q_buf);  // (nq, d)
    for (int64_t j0 = begin; j0 < end; j0 += kTileK) {
      const int64_t nk = std::min(kTileK, end - j0);
      transpose_tile(nk, d, as_f32(k_head + j0 * d, nk * d, kv_buf), d, kt);
      masked_scores(dims, mask, scale, q_rows, kt, q0, nq, j0, nk, s);
      online_softmax_tile(nq, d, s, m, l, o_rows, d);
      if (dropout.p > 0) dropout_tile(nq, nk, tile_dropout(dims, dropout, bh, q0, j0), s);
      tile_accumulate(nq, nk, d, s, kTileK, 1, as_f32(v_head + j0 * d, nk * d, kv_buf), d, o_rows,
                      d);
    }
    finish_rows(nq, d, m, l, o_rows, lse_rows);
    store_rows(o_rows, nq * d, o_out);
  }
}

template <class E>
void flash_attention_backward(const AttentionDims& dims, const backend::AttentionMask& all_rows,
                              float scale, const AttentionDropout& dropout, const E* dout,
                              const E* q, const E* k, const E* v, const E* o, const float* lse,
                              float* delta, E* dq, E* dk, E* dv, float* workspace, int threads) {
  const int64_t d = dims.d, group = dims.hq / dims.hkv;
  const int64_t q_tiles = ceil_div(dims.t, kTileQ), k_tiles = ceil_div(dims.s, kTileK);
  const int64_t per_thread = flash_workspace_floats(d, true, kStaged<E>);

  // ds = p * (dp - delta) for a tile, or with dropout p * (M * dp - delta) and p := M * p
  // (Note [Dropout inside flash attention] in tensor/ops/attention.h).
  // and, with a soft cap, ds *= 1 - tanh^2 (Note [Soft-capped scores]).
  const auto grad_tile = [&](int64_t bh, int64_t q0, int64_t nq, int64_t j0, int64_t nk, float* p,
                             const float* delta_rows, const float* lse_rows, float* ds) {
    if (dropout.p > 0)
      dropout_softmax_grad_tile(nq, nk, tile_dropout(dims, dropout, bh, q0, j0), p, delta_rows, ds);
    else
      softmax_grad_tile(nq, p, delta_rows, ds);
    if (all_rows.softcap > 0) softcap_grad_tile(nq, all_rows.softcap, p, lse_rows, ds);
  };

  // delta = rowsum(dout * o): (batch, hq, t), o the dropped output when dropping
  const int64_t rows = dims.batch * dims.hq * dims.t;
#pragma omp parallel for schedule(static) num_threads(threads) if (rows * d >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    float acc = 0.0f;
    for (int64_t x = 0; x < d; ++x)
      acc += convert<float>(dout[r * d + x]) * convert<float>(o[r * d + x]);
    delta[r] = acc;
  }

  // Pass 1: dq for one (batch, query head, query tile) (Note [Deterministic attention backward]).
  const int64_t q_items = dims.batch * dims.hq * q_tiles;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (q_items > 1)
  for (int64_t item = 0; item < q_items; ++item) {
    // Note [Costliest tiles first]
    const int64_t bh = item % (dims.batch * dims.hq);
    const int64_t q0 = (q_tiles - 1 - item / (dims.batch * dims.hq)) * kTileQ;
    const int64_t nq = std::min(kTileQ, dims.t - q0);
    const int64_t kv = (bh / dims.hq) * dims.hkv + bh % dims.hq / group;
    const backend::AttentionMask mask = all_rows.row(bh / dims.hq, dims.t);
    const int64_t row0 = bh * dims.t + q0;
    const E* k_head = k + kv * dims.s * d;                               // (s, d)
    const E* v_head = v + kv * dims.s * d;                               // (s, d)
    float* kt = workspace + thread_id() * per_thread;                    // (d, kTileK)
    float* vt = kt + d * kTileK;                                         // (d, kTileK)
    float* p = vt + d * kTileK;                                          // (kTileQ, kTileK)
    float* ds = p + kTileQ * kTileK;                                     // (kTileQ, kTileK)
    float* q_buf = ds + kTileQ * kTileK;                                 // (kTileQ, d) when staged
    float* dout_buf = q_buf + kTileQ * d;                                // (kTileQ, d) when staged
    float* dq_buf = dout_buf + kTileQ * d;                               // (kTileQ, d) when staged
    float* k_buf = dq_buf + kTileQ * d;                                  // (kTileK, d) when staged
    float* v_buf = k_buf + kTileK * d;                                   // (kTileK, d) when staged
    const float* q_rows = as_f32(q + row0 * d, nq * d, q_buf);           // (nq, d)
    const float* dout_rows = as_f32(dout + row0 * d, nq * d, dout_buf);  // (nq, d)
    float* dq_rows = accumulator(dq + row0 * d, dq_buf);                 // (nq, d)
    std::fill(dq_rows, dq_rows + nq * d, 0.0f);
    const int64_t begin = key_begin(dims, mask, q0) / kTileK * kTileK;
    const int64_t end = key_end(dims, mask, q0, nq);
    for (int64_t j0 = begin; j0 < end; j0 += kTileK) {
      const int64_t nk = std::min(kTileK, end - j0);
      const float* k_rows = as_f32(k_head + j0 * d, nk * d, k_buf);  // (nk, d)
      transpose_tile(nk, d, k_rows, d, kt);
      transpose_tile(nk, d, as_f32(v_head + j0 * d, nk * d, v_buf), d, vt);
      masked_scores(dims, mask, scale, q_rows, kt, q0, nq, j0, nk, p);
      probs_from_lse(nq, lse + row0, p);
      tile_scores(nq, d, 1.0f, dout_rows, d, vt, ds);  // dp = dout @ v^T
      grad_tile(bh, q0, nq, j0, nk, p, delta + row0, lse + row0, ds);
      tile_accumulate(nq, nk, d, ds, kTileK, 1, k_rows, d, dq_rows, d);
    }
    for (int64_t x = 0; x < nq * d; ++x) dq_rows[x] *= scale;
    store_rows(dq_rows, nq * d, dq + row0 * d);
  }

  // Pass 2: dk and dv for one (batch, kv head, key tile), summing the group's query heads.
  const int64_t k_items = dims.batch * dims.hkv * k_tiles;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (k_items > 1)
  for (int64_t item = 0; item < k_items; ++item) {
    // Note [Costliest tiles first]: the first key tile of every kv head, then the next.
    const int64_t kv = item % (dims.batch * dims.hkv), j0 = item / (dims.batch * dims.hkv) * kTileK;
    const int64_t nk = std::min(kTileK, dims.s - j0);
    const int64_t b = kv / dims.hkv, h_first = kv % dims.hkv * group;
    const backend::AttentionMask mask = all_rows.row(b, dims.t);
    const int64_t key0 = kv * dims.s + j0;
    float* kt = workspace + thread_id() * per_thread;  // (d, kTileK)
    float* vt = kt + d * kTileK;                       // (d, kTileK)
    float* p = vt + d * kTileK;                        // (kTileQ, kTileK)
    float* ds = p + kTileQ * kTileK;                   // (kTileQ, kTileK)
    float* q_buf = ds + kTileQ * kTileK;               // (kTileQ, d) when staged
    float* dout_buf = q_buf + kTileQ * d;              // (kTileQ, d) when staged
    float* dk_buf = dout_buf + 2 * kTileQ * d;         // (kTileK, d) when staged
    float* dv_buf = dk_buf + kTileK * d;               // (kTileK, d) when staged
    transpose_tile(nk, d, as_f32(k + key0 * d, nk * d, dk_buf), d, kt);
    transpose_tile(nk, d, as_f32(v + key0 * d, nk * d, dv_buf), d, vt);
    float* dk_rows = accumulator(dk + key0 * d, dk_buf);  // (nk, d)
    float* dv_rows = accumulator(dv + key0 * d, dv_buf);  // (nk, d)
    std::fill(dk_rows, dk_rows + nk * d, 0.0f);
    std::fill(dv_rows, dv_rows + nk * d, 0.0f);
    // The queries that see any of keys [j0, j0 + nk).
    const int64_t q_first = mask.first_query(dims.t, dims.s, j0);
    const int64_t q_end = mask.query_end(dims.t, dims.s, j0 + nk - 1);
    for (int64_t h = h_first; h < h_first + group; ++h) {
      const int64_t bh = b * dims.hq + h;
      for (int64_t q0 = q_first / kTileQ * kTileQ; q0 < q_end; q0 += kTileQ) {
        const int64_t nq = std::min(kTileQ, dims.t - q0);
        const int64_t row0 = bh * dims.t + q0;
        const float* q_rows = as_f32(q + row0 * d, nq * d, q_buf);           // (nq, d)
        const float* dout_rows = as_f32(dout + row0 * d, nq * d, dout_buf);  // (nq, d)
        masked_scores(dims, mask, scale, q_rows, kt, q0, nq, j0, nk, p);
        probs_from_lse(nq, lse + row0, p);
        tile_scores(nq, d, 1.0f, dout_rows, d, vt, ds);  // dout v^T
        grad_tile(bh, q0, nq, j0, nk, p, delta + row0, lse + row0, ds);
        tile_accumulate(nk, nq, d, p, 1, kTileK, dout_rows, d, dv_rows, d);  // p^T dout
        tile_accumulate(nk, nq, d, ds, 1, kTileK, q_rows, d, dk_rows, d);    // ds^T q
      }
    }
    for (int64_t x = 0; x < nk * d; ++x) dk_rows[x] *= scale;
    store_rows(dk_rows, nk * d, dk + key0 * d);
    store_rows(dv_rows, nk * d, dv + key0 * d);
  }
}

#define FITGRAD_FLASH(E)                                                                         \
  template void flash_attention_forward(const AttentionDims&, const backend::AttentionMask&,     \
                                        float, const AttentionDropout&, const E*, const E*,      \
                                        const E*, E*, float*, float*, int);                      \
  template void flash_attention_backward(const AttentionDims&, const backend::AttentionMask&,    \
                                         float, const AttentionDropout&, const E*, const E*,     \
                                         const E*, const E*, const E*, const float*, float*, E*, \
                                         E*, E*, float*, int);
FITGRAD_FLASH(float)
FITGRAD_FLASH(BFloat16)
FITGRAD_FLASH(Half)
#undef FITGRAD_FLASH

}  // namespace fitgrad::cpu
