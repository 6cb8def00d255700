// Decoder blocks and decoder-only language models for both families (config.h):
//
//   Gpt2LMHeadModel                       LlamaForCausalLM
//     transformer                           model
//       wte (V, C), wpe (ctx, C)              embed_tokens (V, C)
//       h.{i}: ln_1, attn, ln_2, mlp          layers.{i}: input_layernorm, self_attn,
//                                                         post_attention_layernorm, mlp
//       ln_f                                  norm
//     (lm_head tied to wte)                 lm_head (V, C) unless tie_word_embeddings
//
// Both blocks are pre-norm: x += attn(norm_1(x)); x += mlp(norm_2(x)).
//
// Note [Two decoder families]
// The families differ in positions (learned wpe added to the embeddings vs RoPE inside
// attention), norms (LayerNorm with bias vs RMSNorm), the MLP (GELU vs SwiGLU) and the
// weight layout (Conv1D (in, out) vs torch (out, in)); everything else -- the block
// order, checkpointing, the loss -- is shared by CausalLM.
//
// Note [Initialisation styles]
// As Hugging Face's _init_weights: every Linear/Conv1D weight and every embedding is
// normal(0, initializer_range) (0.02 by default), biases zero, norm weights one (and
// LayerNorm biases zero). GPT-2 additionally scales the residual projections (attn.c_proj
// and mlp.c_proj weights) by 1/sqrt(2 n_layer), as in the GPT-2 paper; Llama does not.
// Draws follow registration order (Note [Parameter initialisation] in module.h).
//
// Note [Checkpointing the blocks]
// forward runs the blocks through autograd::checkpoint_sequential with the model's
// SegmentPlan: none (the default) saves every activation; SegmentPlan::count(L) checkpoints
// each block alone; sqrt_blocks() makes round(sqrt(L)) segments; per_block() any grouping.
// Embeddings, the final norm, the head and the loss are never checkpointed. The blocks are
// deterministic (no dropout), so checkpointed gradients are bitwise those of the plain run.
//
// Note [Cached decoding]
// forward_cached runs new tokens against a KvCache (kv_cache.h) without grad: the tokens
// take positions cache.length() onwards (the wpe rows from there for GPT-2, the RoPE
// offset for Llama), each attention layer appends their keys and values to its slot of the
// cache and attends over all cached positions with the bottom-right aligned causal mask of
// ops::flash_attention, so prefill then token-by-token decoding gives the logits of one
// full forward over the whole sequence. No checkpointing applies (nothing is saved).
#pragma once

#include <memory>

#include "autograd/checkpoint.h"
#include "nn/attention.h"
#include "nn/config.h"
#include "nn/kv_cache.h"
#include "nn/layers.h"
#include "nn/mlp.h"
#include "nn/nf4_embedding.h"

namespace fitgrad::nn {

// Note [Row-chunked head and MLP]
// For long sequences (issue 27) the two per-token parts of a step with the largest
// intermediates run in row chunks with recompute (autograd/row_chunks.h): each block's
// norm + MLP over tiles of the B T rows (tiled MLP: one tile's (rows, intermediate) alive
// instead of the sequence's), and the head with the loss (the fused head: one chunk's
// logits instead of (B T, V)). Both are off by default. The automatic sizes follow the
// published rules: ceil(B T / C) MLP tiles (Arctic Long Sequence Training's shard count:
// a tile has about C rows, so its intermediate is about the size of the MLP's weights),
// and ceil(V / C) head chunks (Liger's fused linear cross-entropy: a chunk's logits are
// about the size of the hidden states). Gradients equal the unchunked ones to float
// rounding; a chunk's dropout draws are its own (Note [Row-chunked recompute]).
struct RowChunking {
  bool fused_head_loss = false;
  int64_t head_chunk = 0;  // rows per head chunk; 0: the rule
  bool tiled_mlp = false;
  int64_t mlp_tiles = 0;  // tiles per block; 0: the rule
};

// One decoder block: (B, T, C) -> (B, T, C). With a cache, x holds the positions after
// cache->length() and attention goes through the cache's layer `layer`. mlp_tiles > 0 runs
// the norm + MLP over that many row tiles (Note [Row-chunked head and MLP]). `packed`: the
// rows pack several examples, each attending to itself (nn/packed_rows.h).
class Block : public Module {
 public:
  using Module::Module;
  Tensor forward(const Tensor& x, KvCache* cache = nullptr, int64_t layer = 0,
                 int64_t mlp_tiles = 0, const PackedRows* packed = nullptr) const;

 protected:
  // x (B, T, C) -> attn(norm_1(x)) and h (B, T, C) -> mlp(norm_2(h)), each (B, T, C).
  virtual Tensor attention_branch(const Tensor& x, KvCache* cache, int64_t layer,
                                  const PackedRows* packed) const = 0;
  virtual Tensor mlp_branch(const Tensor& h) const = 0;
};

class Gpt2Block : public Block {
 public:
  Gpt2Block(std::string path, std::string name, const ModelConfig& cfg, BuildContext& ctx);

 protected:
  Tensor attention_branch(const Tensor& x, KvCache* cache, int64_t layer,
                          const PackedRows* packed) const override;
  Tensor mlp_branch(const Tensor& h) const override;

 private:
  LayerNorm* ln_1_;
  Gpt2Attention* attn_;
  LayerNorm* ln_2_;
  Gpt2Mlp* mlp_;
};

class LlamaBlock : public Block {
 public:
  // layer: the block's index, which picks its attention window (ModelConfig::layer_slides).
  LlamaBlock(std::string path, std::string name, const ModelConfig& cfg, int64_t layer,
             BuildContext& ctx);

 protected:
  Tensor attention_branch(const Tensor& x, KvCache* cache, int64_t layer,
                          const PackedRows* packed) const override;
  Tensor mlp_branch(const Tensor& h) const override;

 private:
  RMSNorm* input_layernorm_;
  LlamaAttention* self_attn_;
  RMSNorm* post_attention_layernorm_;
  // Gemma's MLP input and output norms (Note [Gemma blocks] in decoder.cpp).
  RMSNorm* pre_feedforward_layernorm_ = nullptr;
  RMSNorm* post_feedforward_layernorm_ = nullptr;
  SwiGluMlp* mlp_;
};

// The body of a decoder ("transformer" or "model"): embeddings, blocks, final norm.
class DecoderBody : public Module {
 public:
  using Module::Module;
  // ids (B, T) -> final hidden states (B, T, C), blocks checkpointed per `plan`, their MLPs
  // in mlp_tiles tiles (0: untiled; Note [Row-chunked head and MLP]), over packed rows when
  // `packed` says so.
  Tensor forward(const Tensor& ids, const autograd::SegmentPlan& plan, int64_t mlp_tiles = 0,
                 const PackedRows* packed = nullptr) const;
  // ids (B, T_new) at positions cache.length() onwards -> (B, T_new, C) (Note [Cached
  // decoding]); does not advance the cache.
  Tensor forward_cached(const Tensor& ids, KvCache& cache) const;
  // A tied head: x (B, T, C) in the compute dtype -> logits (B, T, V) through the token
  // embedding table (V, C).
  virtual Tensor tied_head(const Tensor& x) const = 0;
  const std::vector<const Block*>& blocks() const { return blocks_; }

 protected:
  // ids (B, T) at positions [position, position + T), or packed rows' positions -> (B, T, C).
  virtual Tensor embed(const Tensor& ids, int64_t position,
                       const PackedRows* packed = nullptr) const = 0;
  virtual Tensor final_norm(const Tensor& x) const = 0;
  std::vector<const Block*> blocks_;
};

class Gpt2Model : public DecoderBody {
 public:
  Gpt2Model(std::string path, std::string name, const ModelConfig& cfg, BuildContext& ctx);
  Tensor tied_head(const Tensor& x) const override;

 protected:
  Tensor embed(const Tensor& ids, int64_t position, const PackedRows* packed) const override;
  Tensor final_norm(const Tensor& x) const override { return ln_f_->forward(x); }

 private:
  double embd_pdrop_;  // Note [Dropout as configured] in config.h
  Embedding *wte_, *wpe_;
  LayerNorm* ln_f_;
};

class LlamaModel : public DecoderBody {
 public:
  LlamaModel(std::string path, std::string name, const ModelConfig& cfg, BuildContext& ctx);
  Tensor tied_head(const Tensor& x) const override;

 protected:
  // position and packed: RoPE is in attention.
  Tensor embed(const Tensor& ids, int64_t position, const PackedRows* packed) const override;
  Tensor final_norm(const Tensor& x) const override { return norm_->forward(x); }

 private:
  // One of the two: a dense table, or a 4-bit one (BuildOptions::quantized_embedding).
  Embedding* embed_tokens_ = nullptr;
  Nf4Embedding* nf4_embed_tokens_ = nullptr;
  RMSNorm* norm_;
  double embed_scale_ = 0;  // Gemma's sqrt(hidden_size); 0: none
};

// A decoder-only language model: the root of the module tree (path "").
class CausalLM : public Module {
 public:
  const ModelConfig& config() const { return config_; }
  // ids (B, T) i32/i64 -> logits (B, T, V); `packed`: rows of several examples, each
  // attending to itself with its own positions (nn/packed_rows.h).
  Tensor forward(const Tensor& ids, const PackedRows* packed = nullptr) const;
  // Mean cross-entropy of the logits of ids against targets (B, T) (ignore_index -100),
  // through autograd::cross_entropy on (B T, V). A scalar.
  Tensor loss(const Tensor& ids, const Tensor& targets, const PackedRows* packed = nullptr) const;
  // Each position's log-probability of its target, log softmax(logits / temperature)[target],
  // (B, T) f32 for ids and targets (B, T), 0 where the target is -100; always through the
  // fused, chunked head (autograd::chunked_head_token_logprobs: never a (B T, V) tensor, in
  // chunks of row_chunking()'s head_chunk or the rule), with a gradient when grad mode is on,
  // none under NoGradGuard (old and reference log-probabilities). entropy, when not null,
  // receives each position's entropy of softmax(logits / temperature) (B, T) f32, without
  // gradient. The per-token terms of GRPO (train/objectives/grpo_loss.h).
  Tensor token_logprobs(const Tensor& ids, const Tensor& targets, double temperature = 1.0,
                        Tensor* entropy = nullptr, const PackedRows* packed = nullptr) const;
  // ids (B, T_new) of the positions after cache.length() -> their logits (B, T_new, V),
  // under NoGradGuard; the cache then holds T_new more positions (Note [Cached decoding]).
  // The cache must come from this model's config, with batch B.
  Tensor forward_cached(const Tensor& ids, KvCache& cache) const;

  // Note [Checkpointing the blocks].
  void set_checkpointing(const autograd::SegmentPlan& plan) { plan_ = plan; }
  const autograd::SegmentPlan& checkpointing() const { return plan_; }
  // Note [Row-chunked head and MLP]; loss() follows it, forward() tiles the MLP only.
  void set_row_chunking(const RowChunking& chunking);
  const RowChunking& row_chunking() const { return chunking_; }

  const DecoderBody& body() const { return *body_; }
  int64_t num_layers() const { return int64_t(body_->blocks().size()); }

 protected:
  CausalLM(const ModelConfig& cfg);
  bool ignorable_key(const std::string& key) const override;
  // Checks that ids are (B, T) i32/i64 and that positions [start, start + T) fit.
  void check_ids(const Tensor& ids, int64_t start) const;
  // (B, T, C) -> (B, T, V). Takes x by value: under autocast only its compute-dtype copy is
  // kept, so the fp32 output of the final norm is freed before the head's product.
  Tensor head(Tensor x) const;

  ModelConfig config_;
  DecoderBody* body_ = nullptr;
  LinearLayer* lm_head_ = nullptr;  // null when tied
  autograd::SegmentPlan plan_ = autograd::SegmentPlan::none();
  RowChunking chunking_;

 private:
  // The MLP tiles for n rows per chunking_ (0: untiled), and the head's rows per chunk.
  int64_t mlp_tiles(int64_t n) const;
  int64_t head_chunk_rows(int64_t n) const;
};

class Gpt2LMHeadModel : public CausalLM {
 public:
  Gpt2LMHeadModel(const ModelConfig& cfg, const BuildOptions& options = {});
};

class LlamaForCausalLM : public CausalLM {
 public:
  LlamaForCausalLM(const ModelConfig& cfg, const BuildOptions& options = {});
};

// The model of cfg.family, validated, with parameters on options.device.
std::unique_ptr<CausalLM> build_model(const ModelConfig& cfg, const BuildOptions& options = {});

}  // namespace fitgrad::nn
