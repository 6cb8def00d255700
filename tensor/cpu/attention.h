// CPU attention kernels: flash attention (tiled, online softmax, forward and backward;
// attention_flash.cpp) and the naive reference that materialises the (B, Hq, T, S) scores
// (attention_naive.cpp). All operands are fp32, contiguous, in the (batch, head, position,
// dim) layout; tensor/ops/attention.cpp checks shapes, converts dtypes and allocates every
// buffer, including the per-thread workspace, so the ledger sees each byte.
//
// Grouped-query heads: query head h reads kv head h / (hq / hkv). Causal masking is
// bottom-right aligned: query i sees key j iff j <= i + (s - t) (Note [Causal alignment] in
// attention_flash.cpp); a query that sees no key gets o = 0 and lse = -inf.
#pragma once

#include <cstdint>

namespace fitgrad::cpu {

struct AttentionDims {
  int64_t batch = 0;
  int64_t hq = 0;   // query heads
  int64_t hkv = 0;  // key/value heads, divides hq
  int64_t t = 0;    // queries
  int64_t s = 0;    // keys
  int64_t d = 0;    // head dim
};

// fp32 workspace one thread needs: forward (kv tile transposed, score tile, running max
// and sum) or backward (k and v tiles transposed, probability and gradient tiles).
int64_t flash_workspace_floats(int64_t d, bool backward);

// o (batch, hq, t, d) and lse (batch, hq, t) from q (batch, hq, t, d), k and v
// (batch, hkv, s, d). workspace holds threads * flash_workspace_floats(d, false) floats.
void flash_attention_forward(const AttentionDims& dims, bool causal, float scale, const float* q,
                             const float* k, const float* v, float* o, float* lse, float* workspace,
                             int threads);

// dq (batch, hq, t, d), dk and dv (batch, hkv, s, d) from dout, q, o (batch, hq, t, d),
// k, v and lse, recomputing the probabilities tile by tile. delta (batch, hq, t) is scratch
// for rowsum(dout * o); workspace holds threads * flash_workspace_floats(d, true) floats.
void flash_attention_backward(const AttentionDims& dims, bool causal, float scale,
                              const float* dout, const float* q, const float* k, const float* v,
                              const float* o, const float* lse, float* delta, float* dq, float* dk,
                              float* dv, float* workspace, int threads);

// o (batch, hq, t, d) through the materialised probabilities probs (batch, hq, t, s).
void naive_attention_forward(const AttentionDims& dims, bool causal, float scale, const float* q,
                             const float* k, const float* v, float* probs, float* o);

// dq, dk, dv through the materialised probs and dprobs (batch, hq, t, s).
void naive_attention_backward(const AttentionDims& dims, bool causal, float scale,
                              const float* dout, const float* q, const float* k, const float* v,
                              float* probs, float* dprobs, float* dq, float* dk, float* dv);

}  // namespace fitgrad::cpu
