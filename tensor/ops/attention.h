// Scaled dot-product attention (DESIGN.md, Numerics): the flash front-ends that a
// transformer uses, forward and backward, and the naive version that materialises the
// (B, Hq, T, S) probabilities, kept as the reference for tests and the baseline for
// bench/attention_bench.cpp. Raw ops: no autograd here (autograd/ wires the backward).
//
// Layout (B, H, T, D): batch, heads, positions, head dim. Grouped-query attention: k and v
// have Hkv heads, Hkv divides Hq, and query head h uses kv head h / (Hq / Hkv) (Hkv = 1 is
// multi-query). The mask: none, causal (query i sees key j iff j <= i + (S - T), bottom-right
// aligned so that decoding T new tokens against a KV cache of S positions works), or causal
// within a sliding window (Note [Sliding-window attention] in tensor/backend/attention_mask.h;
// a bool is taken for the first two); a query that sees no key (only when T > S) gets o = 0
// and lse = -inf. scale = 0 means 1 / sqrt(D).
//
// Inputs are f32, f16 or bf16 (q, k and v share one dtype), computed in f32; outputs and
// gradients come back in that dtype, lse stays f32 (Note [Op dtypes and devices]). On meta
// every output and workspace is allocated as on the CPU and nothing is computed.
//
// Note [Dropout inside flash attention]
// flash_attention with dropout_p > 0 computes o = dropout(softmax(scale q k^T)) v, the
// composed path of Note [Attention dropout] (nn/attention.cpp) without its (B, Hq, T, S)
// probabilities. It reserves B Hq T S draws from the generator, as ops::dropout on those
// probabilities would, and element (b, h, i, j) of the probabilities takes draw
// offset + ((b Hq + h) T + i) S + j, its flat index, with dropout's keep rule
// (tensor/random/dropout_mask.h): the same elements are dropped and the generator ends in
// the same state as on the composed path. (The composed path broadcasts grouped kv heads
// over probabilities shaped (B, Hkv, G, T, S), whose flat order is the same.) Inside the
// tiles the online softmax's running max and sum, and so lse, use the undropped
// probabilities; each tile's probabilities are multiplied by their factors (0 or 1 / (1 - p))
// just before they are accumulated into o. Only the RngState is kept for backward, which
// regenerates each tile's factors M from it. With Z = M * P (elementwise) and o = Z v:
//   dv = Z^T dout,   dZ = dout v^T,   dP = M * dZ,   dS = P * (dP - D),
//   D_i = sum_j P_ij dP_ij = sum_j Z_ij dZ_ij = sum_x dout_ix (Z v)_ix = rowsum(dout * o)_i,
// so delta keeps its definition (computed from the dropped o) and only the tile steps
// change: dv accumulates Z instead of P, and dS takes M * dZ instead of dZ.
#pragma once

#include "tensor/backend/attention_mask.h"
#include "tensor/random/generator.h"
#include "tensor/tensor.h"

namespace fitgrad::ops {

// `mask` over packed rows (Note [Packed rows] in tensor/backend/attention_mask.h): segments
// (2, B, T) i32 on the attention's device holds each position's example [begin, end) within
// its row; the mask borrows it, and the caller keeps it alive until the backward has run. On
// meta the mask is returned unchanged (nothing is computed there).
backend::AttentionMask packed_rows_mask(backend::AttentionMask mask, const Tensor& segments);

struct AttentionOut {
  Tensor o;                // (B, Hq, T, D)
  Tensor lse;              // (B, Hq, T) f32: log-sum-exp of each query's scaled scores
  RngState dropout_state;  // where the dropout's draws start (unused when dropout_p is 0)
};

struct AttentionGrads {
  Tensor dq;  // (B, Hq, T, D)
  Tensor dk;  // (B, Hkv, S, D)
  Tensor dv;  // (B, Hkv, S, D)
};

// softmax(scale * q k^T) v, tiled over keys with an online softmax: besides o and lse it
// holds one workspace of a few tile buffers per thread, never T x S. dropout_p in [0, 1)
// drops probabilities with draws reserved from `gen` (Note [Dropout inside flash
// attention]); 0 reserves none.
AttentionOut flash_attention(const Tensor& q,  // (B, Hq, T, D)
                             const Tensor& k,  // (B, Hkv, S, D)
                             const Tensor& v,  // (B, Hkv, S, D)
                             const backend::AttentionMask& mask, double scale = 0,
                             double dropout_p = 0, Generator& gen = default_generator());

// Gradients of flash_attention, recomputing the probabilities tile by tile from lse, and
// their dropout factors from dropout_state (the forward's dropout_p and dropout_state).
// dk and dv of a kv head shared by several query heads are summed over those heads in a
// fixed order, so the result is bitwise reproducible (Note [Deterministic attention
// backward] in tensor/cpu/attention_flash.cpp).
AttentionGrads flash_attention_backward(const Tensor& dout,  // (B, Hq, T, D)
                                        const Tensor& q,     // (B, Hq, T, D)
                                        const Tensor& k,     // (B, Hkv, S, D)
                                        const Tensor& v,     // (B, Hkv, S, D)
                                        const Tensor& o,     // (B, Hq, T, D)
                                        const Tensor& lse,   // (B, Hq, T) f32
                                        const backend::AttentionMask& mask, double scale = 0,
                                        double dropout_p = 0, const RngState& dropout_state = {});

// The same attention through a materialised (B, Hq, T, S) f32 probability matrix.
Tensor naive_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                       const backend::AttentionMask& mask, double scale = 0);

// Its gradients, through materialised probabilities and their gradient, both (B, Hq, T, S).
AttentionGrads naive_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                        const Tensor& v, const backend::AttentionMask& mask,
                                        double scale = 0);

}  // namespace fitgrad::ops
