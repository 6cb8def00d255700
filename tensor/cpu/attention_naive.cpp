// Naive attention on the CPU: the whole (batch, hq, t, s) probability matrix, and in
// backward its gradient too, is materialised and multiplied with gemm_f32. It is the
// reference for flash attention (attention_flash.cpp) and the baseline of
// bench/attention_bench.cpp, so it favours plain, obviously correct code over speed;
// only the products are fast. Masking follows Note [Causal alignment].
#include <algorithm>
#include <cmath>
#include <limits>

#include "tensor/cpu/attention.h"
#include "tensor/cpu/gemm.h"

namespace fitgrad::cpu {
namespace {

constexpr int64_t kParallelMin = int64_t(1) << 15;  // elements worth waking a thread team for

// probs (batch, hq, t, s) = softmax(scale * q k^T) with the causal mask; a row that sees no
// key is all zeros. The query heads of one kv head are one batched product against it.
void probabilities(const AttentionDims& dims, bool causal, float scale, const float* q,
                   const float* k, float* probs) {
  const int64_t group = dims.hq / dims.hkv, t = dims.t, s = dims.s, d = dims.d;
  for (int64_t kv = 0; kv < dims.batch * dims.hkv; ++kv) {
    const int64_t bh0 = kv * group;  // first query head of this kv head, across batches
    gemm_f32_batched(false, true, group, t, s, d, scale, q + bh0 * t * d, d, t * d, k + kv * s * d,
                     d, 0, 0.0f, probs + bh0 * t * s, s, t * s);
  }
  const int64_t rows = dims.batch * dims.hq * t;
#pragma omp parallel for schedule(static) if (rows * s >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    float* row = probs + r * s;
    const int64_t visible = causal ? std::clamp<int64_t>(r % t + s - t + 1, 0, s) : s;
    std::fill(row + visible, row + s, 0.0f);
    if (visible == 0) continue;
    const float mx = *std::max_element(row, row + visible);
    double sum = 0.0;
    for (int64_t j = 0; j < visible; ++j) {
      row[j] = std::exp(row[j] - mx);
      sum += row[j];
    }
    const float inv = float(1.0 / sum);
    for (int64_t j = 0; j < visible; ++j) row[j] *= inv;
  }
}

}  // namespace

void naive_attention_forward(const AttentionDims& dims, bool causal, float scale, const float* q,
                             const float* k, const float* v, float* probs, float* o) {
  const int64_t group = dims.hq / dims.hkv, t = dims.t, s = dims.s, d = dims.d;
  if (t == 0 || s == 0) {  // no products to form (gemm wants leading dims >= 1)
    std::fill(o, o + dims.batch * dims.hq * t * d, 0.0f);
    return;
  }
  probabilities(dims, causal, scale, q, k, probs);
  for (int64_t kv = 0; kv < dims.batch * dims.hkv; ++kv) {
    const int64_t bh0 = kv * group;
    gemm_f32_batched(false, false, group, t, d, s, 1.0f, probs + bh0 * t * s, s, t * s,
                     v + kv * s * d, d, 0, 0.0f, o + bh0 * t * d, d, t * d);
  }
}

void naive_attention_backward(const AttentionDims& dims, bool causal, float scale,
                              const float* dout, const float* q, const float* k, const float* v,
                              float* probs, float* dprobs, float* dq, float* dk, float* dv) {
  const int64_t group = dims.hq / dims.hkv, t = dims.t, s = dims.s, d = dims.d;
  if (t == 0 || s == 0) {
    std::fill(dq, dq + dims.batch * dims.hq * t * d, 0.0f);
    std::fill(dk, dk + dims.batch * dims.hkv * s * d, 0.0f);
    std::fill(dv, dv + dims.batch * dims.hkv * s * d, 0.0f);
    return;
  }
  probabilities(dims, causal, scale, q, k, probs);
  // dprobs = dout v^T
  for (int64_t kv = 0; kv < dims.batch * dims.hkv; ++kv) {
    const int64_t bh0 = kv * group;
    gemm_f32_batched(false, true, group, t, s, d, 1.0f, dout + bh0 * t * d, d, t * d,
                     v + kv * s * d, d, 0, 0.0f, dprobs + bh0 * t * s, s, t * s);
  }
  // dscores = p * (dp - rowsum(p * dp)), written over dprobs
  const int64_t rows = dims.batch * dims.hq * t;
#pragma omp parallel for schedule(static) if (rows * s >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float* p = probs + r * s;
    float* dp = dprobs + r * s;
    double dot = 0.0;
    for (int64_t j = 0; j < s; ++j) dot += double(p[j]) * dp[j];
    for (int64_t j = 0; j < s; ++j) dp[j] = p[j] * (dp[j] - float(dot));
  }
  for (int64_t kv = 0; kv < dims.batch * dims.hkv; ++kv) {
    const int64_t bh0 = kv * group;
    // dq = scale * dscores k
    gemm_f32_batched(false, false, group, t, d, s, scale, dprobs + bh0 * t * s, s, t * s,
                     k + kv * s * d, d, 0, 0.0f, dq + bh0 * t * d, d, t * d);
    // dk = scale * sum_h dscores_h^T q_h, dv = sum_h p_h^T dout_h, heads in order
    for (int64_t h = 0; h < group; ++h) {
      const float beta = h == 0 ? 0.0f : 1.0f;
      const int64_t bh = bh0 + h;
      gemm_f32(true, false, s, d, t, scale, dprobs + bh * t * s, s, q + bh * t * d, d, beta,
               dk + kv * s * d, d);
      gemm_f32(true, false, s, d, t, 1.0f, probs + bh * t * s, s, dout + bh * t * d, d, beta,
               dv + kv * s * d, d);
    }
  }
}

}  // namespace fitgrad::cpu
