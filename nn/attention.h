// Causal self-attention for both families, on the flash-style autograd::attention
// (which saves only q, k, v, the output, the log-sum-exp and, with attention dropout, an
// RngState):
//   - Gpt2Attention: fused c_attn (C -> 3C, Conv1D layout) split into q, k, v; learned
//     positions live in the decoder, so no RoPE here; c_proj (C -> C).
//   - LlamaAttention: q_proj (C -> H D), k_proj and v_proj (C -> Hkv D) for MHA or GQA,
//     RoPE with the model's theta on q and k, o_proj (H D -> C); q/k/v and o biases per
//     config (qwen2 has q/k/v biases).
// Both take x (B, T, C) and return (B, T, C). With a KvCache (kv_cache.h) the T tokens of
// x are the positions after the cache's length: their keys and values join the cache and
// the queries attend over every cached position (causal, bottom-right aligned). With packed
// rows (packed_rows.h) each example attends to itself, RoPE at its own positions.
#pragma once

#include "nn/config.h"
#include "nn/layers.h"
#include "nn/packed_rows.h"
#include "tensor/backend/attention_mask.h"
#include "tensor/rope_params.h"

namespace fitgrad::nn {

class KvCache;

class Gpt2Attention : public Module {
 public:
  Gpt2Attention(std::string path, std::string name, const ModelConfig& cfg, BuildContext& ctx);
  // (B, T, C) -> (B, T, C); with a cache, through its layer `layer`.
  Tensor forward(const Tensor& x, KvCache* cache = nullptr, int64_t layer = 0,
                 const PackedRows* packed = nullptr) const;
  const LinearLayer& c_attn() const { return *c_attn_; }
  const LinearLayer& c_proj() const { return *c_proj_; }

 private:
  int64_t heads_, head_dim_;
  double attn_pdrop_, resid_pdrop_;  // Note [Dropout as configured] in config.h
  LinearLayer* c_attn_;              // (C, 3C)
  LinearLayer* c_proj_;              // (C, C), init std / sqrt(2 L)
};

// Causal attention composed from autograd ops with dropout p on the probabilities (Note
// [Attention dropout] in attention.cpp): q (B, H, T, D), k and v (B, Hkv, T, D), H a
// multiple of Hkv; returns (B, H, T, D). Draws from the global generator.
Tensor attention_with_dropout(const Tensor& q, const Tensor& k, const Tensor& v, double p);

// The path attention with dropout takes in training (Note [Attention dropout]): fused, the
// flash kernels with dropout inside (the default), or composed, attention_with_dropout.
enum class AttentionDropoutPath { fused, composed };

// Selects the path for its lifetime, process-wide, and restores the previous one. A model
// trained under checkpointing recomputes its blocks in backward: the scope must cover the
// backward too.
class AttentionDropoutPathScope {
 public:
  explicit AttentionDropoutPathScope(AttentionDropoutPath path);
  ~AttentionDropoutPathScope();
  AttentionDropoutPathScope(const AttentionDropoutPathScope&) = delete;
  AttentionDropoutPathScope& operator=(const AttentionDropoutPathScope&) = delete;

 private:
  AttentionDropoutPath previous_;
};

class LlamaAttention : public Module {
 public:
  // layer: the index of its block (its window and RoPE base, Note [Gemma blocks]).
  LlamaAttention(std::string path, std::string name, const ModelConfig& cfg, int64_t layer,
                 BuildContext& ctx);
  // (B, T, C) -> (B, T, C); with a cache, through its layer `layer`, RoPE at positions
  // from the cache's length on.
  Tensor forward(const Tensor& x, KvCache* cache = nullptr, int64_t layer = 0,
                 const PackedRows* packed = nullptr) const;

 private:
  int64_t heads_, kv_heads_, head_dim_;
  RopeParams rope_;  // Note [RoPE frequencies] in tensor/rope_params.h
  // Causal, within the config's sliding window when it has one (Note [Sliding-window
  // attention] in tensor/backend/attention_mask.h).
  backend::AttentionMask mask_;
  double scale_;  // 0: 1 / sqrt(head_dim); Gemma's query_pre_attn_scalar^-1/2
  RMSNorm *q_norm_ = nullptr, *k_norm_ = nullptr;  // Qwen3's (ModelConfig::qk_norm)
  double attn_pdrop_;                              // Note [Dropout as configured] in config.h
  LinearLayer *q_proj_ = nullptr, *k_proj_ = nullptr, *v_proj_ = nullptr;  // torch (out, in)
  LinearLayer* qkv_proj_ = nullptr;  // Phi-3's fused q, k, v ((q + 2 kv), in)
  LinearLayer* o_proj_ = nullptr;
};

}  // namespace fitgrad::nn
