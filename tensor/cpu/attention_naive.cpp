// Naive attention on the CPU: the whole (batch, hq, t, s) probability matrix, and in
// backward its gradient too, is materialised and multiplied with gemm_f32. It is the
// reference for flash attention (attention_flash.cpp) and the baseline of
// bench/attention_bench.cpp, so it favours plain, obviously correct code over speed;
// only the products are fast. Masking follows Note [Causal alignment]. The work runs one
// kv head at a time (its group of query heads against it); bf16 and f16 operands are
// widened one kv head at a time into the workspace, and that head's outputs are kept there
// in f32 and rounded once (Note [Staged attention tiles] in attention_flash.cpp).
#include <algorithm>
#include <cmath>
#include <limits>

#include "tensor/convert.h"
#include "tensor/cpu/attention.h"
#include "tensor/cpu/gemm.h"
#include "tensor/cpu/stage.h"

namespace fitgrad::cpu {
namespace {

constexpr int64_t kParallelMin = int64_t(1) << 15;  // elements worth waking a thread team for

// Hands out the next n floats of a staging workspace for bf16/f16 operands; for f32 there
// is no workspace and nothing is handed out (as_f32 and accumulator use the operands).
template <class E>
class Staging {
 public:
  explicit Staging(float* workspace) : next_(workspace) {}
  float* take(int64_t n) {
    float* p = next_;
    if constexpr (kStaged<E>) next_ += n;
    return p;
  }

 private:
  float* next_;
};

// probs (group, t, s) = softmax(scale * q k^T) for the query heads q (group, t, d) of one
// kv head k (s, d), under the mask; a row that sees no key is all zeros.
void probabilities(int64_t group, int64_t t, int64_t s, int64_t d,
                   const backend::AttentionMask& mask, float scale, const float* q, const float* k,
                   float* probs) {
  gemm_f32_batched(false, true, group, t, s, d, scale, q, d, t * d, k, d, 0, 0.0f, probs, s, t * s);
  const int64_t rows = group * t;
#pragma omp parallel for schedule(static) if (rows * s >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    float* row = probs + r * s;
    const int64_t end = mask.key_end(t, s, r % t);
    const int64_t begin = std::min(mask.key_begin(t, s, r % t), end);
    std::fill(row, row + begin, 0.0f);
    std::fill(row + end, row + s, 0.0f);
    if (begin == end) continue;
    const float mx = *std::max_element(row + begin, row + end);
    double sum = 0.0;
    for (int64_t j = begin; j < end; ++j) {
      row[j] = std::exp(row[j] - mx);
      sum += row[j];
    }
    const float inv = float(1.0 / sum);
    for (int64_t j = begin; j < end; ++j) row[j] *= inv;
  }
}

}  // namespace

int64_t naive_workspace_floats(int64_t group, int64_t t, int64_t s, int64_t d, bool backward,
                               bool staged) {
  if (!staged) return 0;
  // forward: q and o of the group, k and v; backward: q, dout and dq, k, v, dk and dv.
  return backward ? 3 * group * t * d + 4 * s * d : 2 * group * t * d + 2 * s * d;
}

template <class E>
void naive_attention_forward(const AttentionDims& dims, const backend::AttentionMask& mask,
                             float scale, const E* q, const E* k, const E* v, float* probs, E* o,
                             float* workspace) {
  const int64_t group = dims.hq / dims.hkv, t = dims.t, s = dims.s, d = dims.d;
  if (t == 0 || s == 0) {  // no products to form (gemm wants leading dims >= 1)
    std::fill(o, o + dims.batch * dims.hq * t * d, convert<E>(0.0f));
    return;
  }
  for (int64_t kv = 0; kv < dims.batch * dims.hkv; ++kv) {
    const int64_t bh0 = kv * group;  // first query head of this kv head
    Staging<E> buf(workspace);
    const int64_t nq = group * t * d, nk = s * d;
    const float* qh = as_f32(q + bh0 * t * d, nq, buf.take(nq));  // (group, t, d)
    const float* kh = as_f32(k + kv * nk, nk, buf.take(nk));      // (s, d)
    const float* vh = as_f32(v + kv * nk, nk, buf.take(nk));      // (s, d)
    float* oh = accumulator(o + bh0 * t * d, buf.take(nq));       // (group, t, d)
    float* ph = probs + bh0 * t * s;                              // (group, t, s)
    probabilities(group, t, s, d, mask.row(kv / dims.hkv, t), scale, qh, kh, ph);
    gemm_f32_batched(false, false, group, t, d, s, 1.0f, ph, s, t * s, vh, d, 0, 0.0f, oh, d,
                     t * d);
    store_rows(oh, nq, o + bh0 * t * d);
  }
}

template <class E>
void naive_attention_backward(const AttentionDims& dims, const backend::AttentionMask& mask,
                              float scale, const E* dout, const E* q, const E* k, const E* v,
                              float* probs, float* dprobs, E* dq, E* dk, E* dv, float* workspace) {
  const int64_t group = dims.hq / dims.hkv, t = dims.t, s = dims.s, d = dims.d;
  if (t == 0 || s == 0) {
    std::fill(dq, dq + dims.batch * dims.hq * t * d, convert<E>(0.0f));
    std::fill(dk, dk + dims.batch * dims.hkv * s * d, convert<E>(0.0f));
    std::fill(dv, dv + dims.batch * dims.hkv * s * d, convert<E>(0.0f));
    return;
  }
  for (int64_t kv = 0; kv < dims.batch * dims.hkv; ++kv) {
    const int64_t bh0 = kv * group;
    Staging<E> buf(workspace);
    const int64_t nq = group * t * d, nk = s * d;
    const float* qh = as_f32(q + bh0 * t * d, nq, buf.take(nq));        // (group, t, d)
    const float* douth = as_f32(dout + bh0 * t * d, nq, buf.take(nq));  // (group, t, d)
    const float* kh = as_f32(k + kv * nk, nk, buf.take(nk));            // (s, d)
    const float* vh = as_f32(v + kv * nk, nk, buf.take(nk));            // (s, d)
    float* dqh = accumulator(dq + bh0 * t * d, buf.take(nq));           // (group, t, d)
    float* dkh = accumulator(dk + kv * nk, buf.take(nk));               // (s, d)
    float* dvh = accumulator(dv + kv * nk, buf.take(nk));               // (s, d)
    float* ph = probs + bh0 * t * s;                                    // (group, t, s)
    float* dph = dprobs + bh0 * t * s;                                  // (group, t, s)
    probabilities(group, t, s, d, mask.row(kv / dims.hkv, t), scale, qh, kh, ph);
    // dprobs = dout v^T
    gemm_f32_batched(false, true, group, t, s, d, 1.0f, douth, d, t * d, vh, d, 0, 0.0f, dph, s,
                     t * s);
    // dscores = p * (dp - rowsum(p * dp)), written over dprobs
    const int64_t rows = group * t;
#pragma omp parallel for schedule(static) if (rows * s >= kParallelMin)
    for (int64_t r = 0; r < rows; ++r) {
      const float* p = ph + r * s;
      float* dp = dph + r * s;
      double dot = 0.0;
      for (int64_t j = 0; j < s; ++j) dot += double(p[j]) * dp[j];
      for (int64_t j = 0; j < s; ++j) dp[j] = p[j] * (dp[j] - float(dot));
    }
    // dq = scale * dscores k
    gemm_f32_batched(false, false, group, t, d, s, scale, dph, s, t * s, kh, d, 0, 0.0f, dqh, d,
                     t * d);
    // dk = scale * sum_h dscores_h^T q_h, dv = sum_h p_h^T dout_h, heads in order
    for (int64_t h = 0; h < group; ++h) {
      const float beta = h == 0 ? 0.0f : 1.0f;
      gemm_f32(true, false, s, d, t, scale, dph + h * t * s, s, qh + h * t * d, d, beta, dkh, d);
      gemm_f32(true, false, s, d, t, 1.0f, ph + h * t * s, s, douth + h * t * d, d, beta, dvh, d);
    }
    store_rows(dqh, nq, dq + bh0 * t * d);
    store_rows(dkh, nk, dk + kv * nk);
    store_rows(dvh, nk, dv + kv * nk);
  }
}

#define FITGRAD_NAIVE(E)                                                                          \
  template void naive_attention_forward(const AttentionDims&, const backend::AttentionMask&,      \
                                        float, const E*, const E*, const E*, float*, E*, float*); \
  template void naive_attention_backward(const AttentionDims&, const backend::AttentionMask&,     \
                                         float, const E*, const E*, const E*, const E*, float*,   \
                                         float*, E*, E*, E*, float*);
FITGRAD_NAIVE(float)
FITGRAD_NAIVE(BFloat16)
FITGRAD_NAIVE(Half)
#undef FITGRAD_NAIVE

}  // namespace fitgrad::cpu
