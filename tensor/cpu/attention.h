// CPU attention kernels: flash attention (tiled, online softmax, forward and backward;
// attention_flash.cpp) and the naive reference that materialises the (B, Hq, T, S) scores
// (attention_naive.cpp). Operands are f32, bf16 or f16 (one dtype per call), contiguous, in
// the (batch, head, position, dim) layout, and the arithmetic is f32; tensor/ops/attention.cpp
// checks shapes and allocates every buffer, including the workspaces, so the ledger sees
// each byte.
//
// Grouped-query heads: query head h reads kv head h / (hq / hkv). Causal masking is
// bottom-right aligned: query i sees key j iff j <= i + (s - t) (Note [Causal alignment] in
// attention_flash.cpp), and a sliding window keeps the newest of those (Note [Sliding-window
// attention] in tensor/backend/attention_mask.h); a query that sees no key gets o = 0 and
// lse = -inf.
#pragma once

#include <cstdint>

#include "tensor/backend/attention_mask.h"
#include "tensor/half.h"

namespace fitgrad::cpu {

struct AttentionDims {
  int64_t batch = 0;
  int64_t hq = 0;   // query heads
  int64_t hkv = 0;  // key/value heads, divides hq
  int64_t t = 0;    // queries
  int64_t s = 0;    // keys
  int64_t d = 0;    // head dim
};

// Dropout on the (batch, hq, t, s) probabilities of flash attention: p = 0 is none; element
// (b, h, i, j) takes Philox draw offset + ((b hq + h) t + i) s + j of seed (Note [Dropout
// inside flash attention] in tensor/ops/attention.h).
struct AttentionDropout {
  double p = 0;
  uint64_t seed = 0;
  uint64_t offset = 0;
};

// fp32 workspace one thread of flash attention needs: forward (kv tile transposed, score
// tile, running max and sum) or backward (k and v tiles transposed, probability and
// gradient tiles), plus, when `staged` (bf16/f16 operands), the f32 rows it widens its
// tile's operands into and accumulates its outputs in (Note [Staged attention tiles]).
int64_t flash_workspace_floats(int64_t d, bool backward, bool staged);

// fp32 workspace naive attention needs beyond probs (and dprobs): none for f32 operands;
// for bf16/f16 the f32 copies of one kv head's operands and outputs, `group` query heads
// of t rows against s keys.
int64_t naive_workspace_floats(int64_t group, int64_t t, int64_t s, int64_t d, bool backward,
                               bool staged);

// E is float, BFloat16 or Half; lse, delta, probs and the workspaces are f32.

// o (batch, hq, t, d) and lse (batch, hq, t) from q (batch, hq, t, d), k and v
// (batch, hkv, s, d), the probabilities dropped as `dropout` says. workspace holds threads * flash_workspace_floats(d, false, E != float)
// floats.
template <class E>
void flash_attention_forward(const AttentionDims& dims, const backend::AttentionMask& mask,
                             float scale, const AttentionDropout& dropout, const E* q, const E* k,
                             const E* v, E* o, float* lse, float* workspace, int threads);

// dq (batch, hq, t, d), dk and dv (batch, hkv, s, d) from dout, q, o (batch, hq, t, d),
// k, v and lse, recomputing the probabilities tile by tile. delta (batch, hq, t) is scratch
// for rowsum(dout * o); workspace holds threads * flash_workspace_floats(d, true, E != float)
// floats.
template <class E>
void flash_attention_backward(const AttentionDims& dims, const backend::AttentionMask& mask,
                              float scale, const AttentionDropout& dropout, const E* dout,
                              const E* q, const E* k, const E* v, const E* o, const float* lse,
                              float* delta, E* dq, E* dk, E* dv, float* workspace, int threads);

// o (batch, hq, t, d) through the materialised probabilities probs (batch, hq, t, s).
template <class E>
void naive_attention_forward(const AttentionDims& dims, const backend::AttentionMask& mask,
                             float scale, const E* q, const E* k, const E* v, float* probs, E* o,
                             float* workspace);

// dq, dk, dv through the materialised probs and dprobs (batch, hq, t, s).
template <class E>
void naive_attention_backward(const AttentionDims& dims, const backend::AttentionMask& mask,
                              float scale, const E* dout, const E* q, const E* k, const E* v,
                              float* probs, float* dprobs, E* dq, E* dk, E* dv, float* workspace);

}  // namespace fitgrad::cpu
