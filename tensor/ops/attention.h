// Scaled dot-product attention (DESIGN.md, Numerics): the flash front-ends that a
// transformer uses, forward and backward, and the naive version that materialises the
// (B, Hq, T, S) probabilities, kept as the reference for tests and the baseline for
// bench/attention_bench.cpp. Raw ops: no autograd here (autograd/ wires the backward).
//
// Layout (B, H, T, D): batch, heads, positions, head dim. Grouped-query attention: k and v
// have Hkv heads, Hkv divides Hq, and query head h uses kv head h / (Hq / Hkv) (Hkv = 1 is
// multi-query). causal: query i sees key j iff j <= i + (S - T), bottom-right aligned so
// that decoding T new tokens against a KV cache of S positions works; a query that sees
// no key (only when T > S) gets o = 0 and lse = -inf. scale = 0 means 1 / sqrt(D).
//
// Inputs are f32, f16 or bf16 (q, k and v share one dtype), computed in f32; outputs and
// gradients come back in that dtype, lse stays f32 (Note [Op dtypes and devices]). On meta
// every output and workspace is allocated as on the CPU and nothing is computed.
#pragma once

#include "tensor/tensor.h"

namespace fitgrad::ops {

struct AttentionOut {
  Tensor o;    // (B, Hq, T, D)
  Tensor lse;  // (B, Hq, T) f32: log-sum-exp of each query's scaled scores
};

struct AttentionGrads {
  Tensor dq;  // (B, Hq, T, D)
  Tensor dk;  // (B, Hkv, S, D)
  Tensor dv;  // (B, Hkv, S, D)
};

// softmax(scale * q k^T) v, tiled over keys with an online softmax: besides o and lse it
// holds one workspace of a few tile buffers per thread, never T x S.
AttentionOut flash_attention(const Tensor& q,  // (B, Hq, T, D)
                             const Tensor& k,  // (B, Hkv, S, D)
                             const Tensor& v,  // (B, Hkv, S, D)
                             bool causal, double scale = 0);

// Gradients of flash_attention, recomputing the probabilities tile by tile from lse.
// dk and dv of a kv head shared by several query heads are summed over those heads in a
// fixed order, so the result is bitwise reproducible (Note [Deterministic attention
// backward] in tensor/cpu/attention_flash.cpp).
AttentionGrads flash_attention_backward(const Tensor& dout,  // (B, Hq, T, D)
                                        const Tensor& q,     // (B, Hq, T, D)
                                        const Tensor& k,     // (B, Hkv, S, D)
                                        const Tensor& v,     // (B, Hkv, S, D)
                                        const Tensor& o,     // (B, Hq, T, D)
                                        const Tensor& lse,   // (B, Hq, T) f32
                                        bool causal, double scale = 0);

// The same attention through a materialised (B, Hq, T, S) f32 probability matrix.
Tensor naive_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                       double scale = 0);

// Its gradients, through materialised probabilities and their gradient, both (B, Hq, T, S).
AttentionGrads naive_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                        const Tensor& v, bool causal, double scale = 0);

}  // namespace fitgrad::ops
