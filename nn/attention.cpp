// Gpt2Attention and LlamaAttention (attention.h).
#include "nn/attention.h"

#include <atomic>
#include <cmath>
#include <tuple>
#include <vector>

#include "autograd/functions.h"
#include "nn/kv_cache.h"
#include "tensor/error.h"
#include "tensor/ops/attention.h"

namespace fitgrad::nn {

namespace ag = fitgrad::autograd;

namespace {

// (B, T, H D) -> (B, H, T, D), a view (the ops make their own contiguous copies).
Tensor split_heads(const Tensor& x, int64_t heads, int64_t head_dim) {
  const int64_t b = x.size(0), t = x.size(1);
  return ag::transpose(ag::reshape(x, {b, t, heads, head_dim}), 1, 2);
}

// Note [Attention dropout]
// In training mode with attn_pdrop > 0 (Note [Dropout as configured] in config.h) attention
// takes the flash kernels with dropout inside (Note [Dropout inside flash attention] in
// tensor/ops/attention.h): the node keeps q, k, v, o, lse and an RngState, no (B, H, T, T)
// tensor. The composed path is kept: attention as Hugging Face's eager attention computes
// it from autograd ops, scores = q k^T / sqrt(D) plus the causal mask, softmax over the
// keys, dropout on the probabilities, times v. It materialises the (B, H, T, T) scores and
// probabilities, which the ledger shows as activations. Both draw the same elements from
// the same generator state and advance it alike, so they agree to float rounding and the
// composed path is the fused one's reference (tests/nn/attention_dropout_model_test.cpp);
// AttentionDropoutPathScope selects it, for tests and for measuring what the fused path
// saves. The flash path runs wherever attention without dropout runs (every backend's
// flash kernels take dropout), so there is no automatic fallback: a call the flash kernels
// refuse, such as a head dim over the cuda kernels' limit, is refused with or without
// dropout. Key and value heads are shared among their query heads by broadcasting (query
// head h reads kv head h / (H / Hkv), as repeat_kv does), not copied. Training has no KV
// cache, so the mask is the square causal one, implicit in the softmax kernel (Note [Causal
// softmax] in tensor/ops/softmax.h): no mask is built or copied. With a KV cache (decoding)
// attention never drops.

std::atomic<AttentionDropoutPath> g_dropout_path{AttentionDropoutPath::fused};

// Causal attention (within `mask`'s window, if any; each packed example to itself), with
// dropout on the probabilities when `m` trains with p > 0.
Tensor causal_attention(const Module& m, const Tensor& q, const Tensor& k, const Tensor& v,
                        double p, bool cached, const PackedRows* packed,
                        backend::AttentionMask mask = true, double scale = 0) {
  if (packed) mask = ops::packed_rows_mask(mask, packed->segments);
  if (!m.training() || p == 0 || cached) return ag::attention(q, k, v, mask, scale);
  if (g_dropout_path.load() == AttentionDropoutPath::composed) {
    FG_CHECK(!mask.windowed() && mask.softcap == 0 && scale == 0 && !packed,
             "[attention] the composed dropout path has no sliding window, soft cap, scale or "
             "packed rows; use the fused one");
    return attention_with_dropout(q, k, v, p);
  }
  return ag::attention(q, k, v, mask, scale, p);
}

// The mask of layer `layer` (Note [Sliding-window attention], Note [Gemma blocks]).
backend::AttentionMask mask_of(const ModelConfig& cfg, int64_t layer) {
  backend::AttentionMask mask = cfg.layer_slides(layer)
                                    ? backend::AttentionMask::sliding(cfg.sliding_window)
                                    : backend::AttentionMask(true);
  mask.softcap = cfg.attn_logit_softcapping;
  return mask;
}

// (B, H, T, D) -> (B, T, H D).
Tensor merge_heads(const Tensor& y) {
  const int64_t b = y.size(0), h = y.size(1), t = y.size(2), d = y.size(3);
  return ag::reshape(ag::transpose(y, 1, 2), {b, t, h * d});
}

}  // namespace

AttentionDropoutPathScope::AttentionDropoutPathScope(AttentionDropoutPath path)
    : previous_(g_dropout_path.exchange(path)) {}

AttentionDropoutPathScope::~AttentionDropoutPathScope() { g_dropout_path.store(previous_); }

Tensor attention_with_dropout(const Tensor& q, const Tensor& k, const Tensor& v, double p) {
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2), d = q.size(3);
  const int64_t hkv = k.size(1), g = h / hkv;
  const Tensor q5 = ag::reshape(ag::contiguous(q), {b, hkv, g, t, d});
  const Tensor k5 = ag::reshape(ag::contiguous(k), {b, hkv, 1, t, d});
  const Tensor v5 = ag::reshape(ag::contiguous(v), {b, hkv, 1, t, d});
  const Tensor scores = ag::scale(ag::matmul(q5, k5, false, true), 1.0 / std::sqrt(double(d)));
  const Tensor probs =
      ag::dropout(ag::softmax(scores, -1, /*causal=*/true), p);  // (B, Hkv, G, T, T)
  return ag::reshape(ag::matmul(probs, v5), {b, h, t, d});
}

Gpt2Attention::Gpt2Attention(std::string path, std::string name, const ModelConfig& cfg,
                             BuildContext& ctx)
    : Module(std::move(path), std::move(name)),
      heads_(cfg.num_heads),
      head_dim_(cfg.hidden_size / cfg.num_heads),
      attn_pdrop_(cfg.attn_pdrop),
      resid_pdrop_(cfg.resid_pdrop) {
  const int64_t c = cfg.hidden_size;
  using L = Linear::Layout;
  c_attn_ = &register_linear("c_attn", c, 3 * c,
                             Linear::Options{true, L::conv1d, cfg.initializer_range}, ctx);
  c_proj_ = &register_linear("c_proj", c, c,
                             Linear::Options{true, L::conv1d, cfg.residual_init_std()}, ctx);
}

Tensor Gpt2Attention::forward(const Tensor& x, KvCache* cache, int64_t layer,
                              const PackedRows* packed) const {
  ForwardScope scope(*this);
  const int64_t c = heads_ * head_dim_;
  const Tensor qkv = c_attn_->forward(x);  // (B, T, 3C)
  auto head = [&](int64_t j) {
    return split_heads(ag::narrow(qkv, 2, j * c, c), heads_, head_dim_);
  };
  Tensor k = head(1), v = head(2);                         // (B, H, T, D)
  if (cache) std::tie(k, v) = cache->update(layer, k, v);  // (B, H, S, D)
  const Tensor y =
      causal_attention(*this, head(0), k, v, attn_pdrop_, cache, packed);  // (B, H, T, D)
  return dropout_in_training(*this, c_proj_->forward(merge_heads(y)), resid_pdrop_);
}

LlamaAttention::LlamaAttention(std::string path, std::string name, const ModelConfig& cfg,
                               int64_t layer, BuildContext& ctx)
    : Module(std::move(path), std::move(name)),
      heads_(cfg.num_heads),
      kv_heads_(cfg.num_kv_heads),
      head_dim_(cfg.resolved_head_dim()),
      // Gemma 3's sliding layers rotate with their own base, unscaled.
      rope_(cfg.rope_local_theta > 0 && cfg.layer_slides(layer)
                ? RopeParams(cfg.rope_local_theta)
                : RopeParams(cfg.rope_theta, cfg.rope_scaling)),
      mask_(mask_of(cfg, layer)),
      scale_(cfg.query_pre_attn_scalar > 0 ? 1.0 / std::sqrt(cfg.query_pre_attn_scalar) : 0.0),
      attn_pdrop_(cfg.attn_pdrop) {
  const int64_t c = cfg.hidden_size, q = heads_ * head_dim_, kv = kv_heads_ * head_dim_;
  using L = Linear::Layout;
  const Linear::Options qkv_opt{cfg.attention_qkv_bias, L::torch, cfg.initializer_range};
  if (cfg.fused_projections) {
    qkv_proj_ = &register_linear("qkv_proj", c, q + 2 * kv, qkv_opt, ctx);
  } else {
    q_proj_ = &register_linear("q_proj", c, q, qkv_opt, ctx);
    k_proj_ = &register_linear("k_proj", c, kv, qkv_opt, ctx);
    v_proj_ = &register_linear("v_proj", c, kv, qkv_opt, ctx);
  }
  o_proj_ = &register_linear(
      "o_proj", q, c, Linear::Options{cfg.attention_out_bias, L::torch, cfg.residual_init_std()},
      ctx);
  if (cfg.qk_norm) {
    q_norm_ = &register_module<RMSNorm>("q_norm", head_dim_, cfg.norm_eps, ctx, cfg.gemma);
    k_norm_ = &register_module<RMSNorm>("k_norm", head_dim_, cfg.norm_eps, ctx, cfg.gemma);
  }
}

Tensor LlamaAttention::forward(const Tensor& x, KvCache* cache, int64_t layer,
                               const PackedRows* packed) const {
  ForwardScope scope(*this);
  Tensor q, k, v;
  if (qkv_proj_ != nullptr) {  // Phi-3: (B, T, q + 2 kv), q then k then v
    const Tensor y = qkv_proj_->forward(x);
    const int64_t nq = heads_ * head_dim_, nkv = kv_heads_ * head_dim_;
    q = split_heads(ag::narrow(y, -1, 0, nq), heads_, head_dim_);
    k = split_heads(ag::narrow(y, -1, nq, nkv), kv_heads_, head_dim_);
    v = split_heads(ag::narrow(y, -1, nq + nkv, nkv), kv_heads_, head_dim_);
  } else {
    q = split_heads(q_proj_->forward(x), heads_, head_dim_);     // (B, H, T, D)
    k = split_heads(k_proj_->forward(x), kv_heads_, head_dim_);  // (B, Hkv, T, D)
    v = split_heads(v_proj_->forward(x), kv_heads_, head_dim_);
  }
  const int64_t position = cache ? cache->length() : 0;
  if (q_norm_) {  // Qwen3: each head normalized over head_dim before RoPE
    q = q_norm_->forward(q);
    k = k_norm_->forward(k);
  }
  const ops::RopePositions positions = packed ? packed->positions : ops::RopePositions{};
  q = ag::rope(q, position, rope_, positions);
  k = ag::rope(k, position, rope_, positions);
  if (cache) std::tie(k, v) = cache->update(layer, k, v);  // (B, Hkv, S, D)
  const Tensor y = causal_attention(*this, q, k, v, attn_pdrop_, cache, packed, mask_,
                                    scale_);  // (B, H, T, D)
  return o_proj_->forward(merge_heads(y));
}

}  // namespace fitgrad::nn
