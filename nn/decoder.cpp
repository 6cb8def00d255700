// Decoder blocks, bodies and the two causal language models (decoder.h).
#include "nn/decoder.h"

#include "autograd/autocast_rules.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/row_chunks.h"
#include "tensor/convert.h"
#include "tensor/error.h"
#include "tensor/interrupt.h"

namespace fitgrad::nn {

namespace ag = fitgrad::autograd;

Gpt2Block::Gpt2Block(std::string path, std::string name, const ModelConfig& cfg, BuildContext& ctx)
    : Block(std::move(path), std::move(name)) {
  ln_1_ = &register_module<LayerNorm>("ln_1", cfg.hidden_size, cfg.norm_eps, ctx);
  attn_ = &register_module<Gpt2Attention>("attn", cfg, ctx);
  ln_2_ = &register_module<LayerNorm>("ln_2", cfg.hidden_size, cfg.norm_eps, ctx);
  mlp_ = &register_module<Gpt2Mlp>("mlp", cfg, ctx);
}

Tensor Block::forward(const Tensor& x, KvCache* cache, int64_t layer, int64_t mlp_tiles,
                      const PackedRows* packed) const {
  ForwardScope scope(*this);
  const Tensor h = ag::add(x, attention_branch(x, cache, layer, packed));  // (B, T, C)
  if (mlp_tiles <= 0) return ag::add(h, mlp_branch(h));
  const int64_t n = h.size(0) * h.size(1), c = h.size(2);
  const int64_t rows = ag::even_chunk_rows(n, (n + mlp_tiles - 1) / mlp_tiles);
  const Tensor m = ag::tiled_rows([this](const Tensor& t) { return mlp_branch(t); },
                                  ag::reshape(h, {n, c}), rows);  // (B T, C)
  return ag::add(h, ag::reshape(m, h.shape()));
}

Tensor Gpt2Block::attention_branch(const Tensor& x, KvCache* cache, int64_t layer,
                                   const PackedRows* packed) const {
  return attn_->forward(ln_1_->forward(x), cache, layer, packed);
}

Tensor Gpt2Block::mlp_branch(const Tensor& h) const { return mlp_->forward(ln_2_->forward(h)); }

// Note [Gemma blocks]
// Gemma 2 and 3 (Gemma2DecoderLayer, Gemma3DecoderLayer) normalize both sides of each
// branch: h = x + post_attention_layernorm(attn(input_layernorm(x))), then
// out = h + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h))). (Llama's
// post_attention_layernorm is the MLP's input norm; Gemma's is the attention's output norm.)
// Their RMSNorm scales by 1 + w, the token embeddings are multiplied by sqrt(hidden_size)
// rounded to the activations' dtype, the MLP is GeGLU with the tanh GELU, attention scales by
// query_pre_attn_scalar^-1/2 and may soft-cap its scores, the logits may be soft-capped, and
// the layers of sliding_window_pattern attend within the sliding window (Gemma 3's with their
// own, unscaled, RoPE base).
LlamaBlock::LlamaBlock(std::string path, std::string name, const ModelConfig& cfg, int64_t layer,
                       BuildContext& ctx)
    : Block(std::move(path), std::move(name)) {
  // Hugging Face's registration order (LlamaDecoderLayer): attention, MLP, then the norms.
  self_attn_ = &register_module<LlamaAttention>("self_attn", cfg, layer, ctx);
  mlp_ = &register_module<SwiGluMlp>("mlp", cfg, ctx);
  const auto norm = [&](const char* name) {
    return &register_module<RMSNorm>(name, cfg.hidden_size, cfg.norm_eps, ctx, cfg.gemma);
  };
  input_layernorm_ = norm("input_layernorm");
  post_attention_layernorm_ = norm("post_attention_layernorm");
  if (cfg.gemma) {
    pre_feedforward_layernorm_ = norm("pre_feedforward_layernorm");
    post_feedforward_layernorm_ = norm("post_feedforward_layernorm");
  }
}

Tensor LlamaBlock::attention_branch(const Tensor& x, KvCache* cache, int64_t layer,
                                    const PackedRows* packed) const {
  const Tensor y = self_attn_->forward(input_layernorm_->forward(x), cache, layer, packed);
  return pre_feedforward_layernorm_ ? post_attention_layernorm_->forward(y) : y;
}

Tensor LlamaBlock::mlp_branch(const Tensor& h) const {
  if (pre_feedforward_layernorm_)  // Note [Gemma blocks]
    return post_feedforward_layernorm_->forward(
        mlp_->forward(pre_feedforward_layernorm_->forward(h)));
  return mlp_->forward(post_attention_layernorm_->forward(h));
}

Tensor DecoderBody::forward(const Tensor& ids, const autograd::SegmentPlan& plan, int64_t mlp_tiles,
                            const PackedRows* packed) const {
  ForwardScope scope(*this);
  const Tensor x = embed(ids, 0, packed);  // (B, T, C)
  std::vector<autograd::Block> fns;
  fns.reserve(blocks_.size());
  for (const Block* b : blocks_)
    fns.push_back([b, mlp_tiles, packed](const Tensor& h) {
      return b->forward(h, nullptr, 0, mlp_tiles, packed);
    });
  return final_norm(autograd::checkpoint_sequential(fns, x, plan));
}

Tensor DecoderBody::forward_cached(const Tensor& ids, KvCache& cache) const {
  ForwardScope scope(*this);
  Tensor x = embed(ids, cache.length());  // (B, T_new, C)
  for (size_t i = 0; i < blocks_.size(); ++i) x = blocks_[i]->forward(x, &cache, int64_t(i));
  return final_norm(x);
}

Gpt2Model::Gpt2Model(std::string path, std::string name, const ModelConfig& cfg, BuildContext& ctx)
    : DecoderBody(std::move(path), std::move(name)), embd_pdrop_(cfg.embd_pdrop) {
  wte_ = &register_module<Embedding>("wte", cfg.vocab_size, cfg.hidden_size, cfg.initializer_range,
                                     ctx);
  wpe_ = &register_module<Embedding>("wpe", cfg.max_position_embeddings, cfg.hidden_size,
                                     cfg.initializer_range, ctx);
  for (int64_t i = 0; i < cfg.num_layers; ++i) {
    interruption_point();  // Note [Interruption points]
    blocks_.push_back(&register_module<Gpt2Block>("h." + std::to_string(i), cfg, ctx));
  }
  ln_f_ = &register_module<LayerNorm>("ln_f", cfg.hidden_size, cfg.norm_eps, ctx);
}

Tensor Gpt2Model::embed(const Tensor& ids, int64_t position, const PackedRows* packed) const {
  const int64_t t = ids.size(1);
  const Tensor& wpe = wpe_->weight();  // (ctx, C)
  FG_CHECK(position + t <= wpe.size(0), "[{}] sequence length {} exceeds n_positions = {}", path(),
           position + t, wpe.size(0));
  const Tensor tok = wte_->forward(ids);  // (B, T, C)
  // + (T, C) broadcast over B, or packed rows' own positions' rows (B, T, C); then GPT-2's
  // embedding dropout.
  const Tensor pos =
      packed ? wpe_->forward(packed->positions.ids) : ag::narrow(wpe, 0, position, t);
  return dropout_in_training(*this, ag::add(tok, pos), embd_pdrop_);
}

LlamaModel::LlamaModel(std::string path, std::string name, const ModelConfig& cfg,
                       BuildContext& ctx)
    : DecoderBody(std::move(path), std::move(name)) {
  if (ctx.options.quantized_embedding)
    nf4_embed_tokens_ = &register_module<Nf4Embedding>("embed_tokens", cfg.vocab_size,
                                                       cfg.hidden_size, cfg.initializer_range,
                                                       *ctx.options.quantized_embedding, ctx);
  else
    embed_tokens_ = &register_module<Embedding>("embed_tokens", cfg.vocab_size, cfg.hidden_size,
                                                cfg.initializer_range, ctx);
  for (int64_t i = 0; i < cfg.num_layers; ++i) {
    interruption_point();  // Note [Interruption points]
    blocks_.push_back(&register_module<LlamaBlock>("layers." + std::to_string(i), cfg, i, ctx));
  }
  norm_ = &register_module<RMSNorm>("norm", cfg.hidden_size, cfg.norm_eps, ctx, cfg.gemma);
  if (cfg.gemma) embed_scale_ = std::sqrt(double(cfg.hidden_size));
}

Tensor LlamaModel::embed(const Tensor& ids, int64_t /*position*/,
                         const PackedRows* /*packed*/) const {
  const Tensor x =
      nf4_embed_tokens_ ? nf4_embed_tokens_->forward(ids) : embed_tokens_->forward(ids);
  if (embed_scale_ == 0) return x;
  // Note [Gemma blocks]: sqrt(hidden_size) as a number of the embeddings' dtype.
  double scale = embed_scale_;
  dispatch_floating(x.dtype(), "[embed]", [&](auto e) {
    scale = double(convert<float>(convert<decltype(e)>(embed_scale_)));
  });
  return ag::scale(x, scale);
}

Tensor LlamaModel::tied_head(const Tensor& x) const {
  if (nf4_embed_tokens_) return nf4_embed_tokens_->head(x);
  // The embedding's compute-dtype copy comes from the step's cache.
  return ag::matmul(x, ag::autocast_operand(backend::OpId::matmul, embed_tokens_->weight()), false,
                    true);
}

Tensor Gpt2Model::tied_head(const Tensor& x) const {
  return ag::matmul(x, ag::autocast_operand(backend::OpId::matmul, wte_->weight()), false, true);
}

CausalLM::CausalLM(const ModelConfig& cfg) : Module("", ""), config_(cfg) { config_.validate(); }

void CausalLM::check_ids(const Tensor& ids, int64_t start) const {
  FG_CHECK(ids.dim() == 2 && (ids.dtype() == DType::i64 || ids.dtype() == DType::i32),
           "[{}] ids must be (B, T) i32 or i64, got {} dims of {}", config_.name, ids.dim(),
           dtype_name(ids.dtype()));
  const int64_t end = start + ids.size(1);
  // Dynamic NTK and YaRN scaling exist to run past the context: up to factor times it.
  const RopeScaling& s = config_.rope_scaling;
  const bool extends = s.type == RopeScaling::Type::dynamic || s.type == RopeScaling::Type::yarn;
  const int64_t limit = extends ? int64_t(double(config_.max_position_embeddings) * s.factor)
                                : config_.max_position_embeddings;
  FG_CHECK(
      end <= limit, "[{}] sequence length {} exceeds {} = {}", config_.name, end,
      extends ? "max_position_embeddings times the RoPE scaling factor" : "max_position_embeddings",
      limit);
}

Tensor CausalLM::forward(const Tensor& ids, const PackedRows* packed) const {
  check_ids(ids, 0);
  const int64_t n = ids.size(0) * ids.size(1);
  return head(body_->forward(ids, plan_, mlp_tiles(n), packed));  // (B, T, V)
}

void CausalLM::set_row_chunking(const RowChunking& chunking) {
  FG_CHECK(chunking.head_chunk >= 0 && chunking.mlp_tiles >= 0,
           "[{}] row chunking needs head_chunk >= 0 and mlp_tiles >= 0, got {} and {}",
           config_.name, chunking.head_chunk, chunking.mlp_tiles);
  chunking_ = chunking;
}

int64_t CausalLM::mlp_tiles(int64_t n) const {
  if (!chunking_.tiled_mlp) return 0;
  if (chunking_.mlp_tiles > 0) return chunking_.mlp_tiles;
  return std::max<int64_t>(1, (n + config_.hidden_size - 1) / config_.hidden_size);
}

int64_t CausalLM::head_chunk_rows(int64_t n) const {
  if (chunking_.head_chunk > 0) return chunking_.head_chunk;
  const int64_t chunks = (config_.vocab_size + config_.hidden_size - 1) / config_.hidden_size;
  return ag::even_chunk_rows(n, std::max<int64_t>(1, (n + chunks - 1) / chunks));
}

Tensor CausalLM::forward_cached(const Tensor& ids, KvCache& cache) const {
  check_ids(ids, cache.length());
  FG_CHECK(cache.num_layers() == num_layers() && cache.batch() == ids.size(0),
           "[{}] the cache holds {} layers of batch {}, the model has {} layers and ids batch {}",
           config_.name, cache.num_layers(), cache.batch(), num_layers(), ids.size(0));
  cache.check_room(ids.size(1));
  autograd::NoGradGuard no_grad;
  const Tensor logits = head(body_->forward_cached(ids, cache));  // (B, T_new, V)
  cache.advance(ids.size(1));
  return logits;
}

Tensor CausalLM::head(Tensor x) const {
  LabelScope label("lm_head");
  // Note [Autocast op table] in autograd/autocast_rules.h; see head() in decoder.h.
  x = ag::autocast_operand(backend::OpId::matmul, x);
  Tensor logits = lm_head_ ? lm_head_->forward(x) : body_->tied_head(x);  // (B, T, V)
  const double cap = config_.final_logit_softcapping;
  if (cap > 0)  // Gemma 2: cap tanh(logits / cap)
    logits = ag::scale(ag::tanh(ag::scale(logits, 1.0 / cap)), cap);
  return logits;
}

Tensor CausalLM::loss(const Tensor& ids, const Tensor& targets, const PackedRows* packed) const {
  FG_CHECK(targets.shape() == ids.shape(), "[{}] targets must have the shape of ids", config_.name);
  const int64_t n = ids.size(0) * ids.size(1);
  if (chunking_.fused_head_loss) {
    check_ids(ids, 0);
    const Tensor x = body_->forward(ids, plan_, mlp_tiles(n), packed);  // (B, T, C)
    // The loss's sums, and its node's recompute in backward, are the loss's; each chunk's
    // logits are the head's.
    LabelScope label("loss");
    return ag::chunked_head_cross_entropy([this](const Tensor& xc) { return head(xc); },
                                          ag::reshape(x, {n, config_.hidden_size}),
                                          targets.reshape({n}), head_chunk_rows(n));
  }
  const Tensor logits = forward(ids, packed);  // (B, T, V)
  LabelScope label("loss");
  return ag::cross_entropy(ag::reshape(logits, {n, config_.vocab_size}), targets.reshape({n}));
}

Tensor CausalLM::token_logprobs(const Tensor& ids, const Tensor& targets, double temperature,
                                Tensor* entropy, const PackedRows* packed) const {
  FG_CHECK(targets.shape() == ids.shape(), "[{}] targets must have the shape of ids", config_.name);
  FG_CHECK(temperature > 0, "[{}] temperature {} (need > 0)", config_.name, temperature);
  check_ids(ids, 0);
  const int64_t b = ids.size(0), t = ids.size(1), n = b * t;
  const Tensor x = body_->forward(ids, plan_, mlp_tiles(n), packed);  // (B, T, C)
  LabelScope label("loss");
  const ag::RowFn chunk_head = [this, temperature](const Tensor& xc) {
    const Tensor logits = head(xc);  // (m, V)
    return temperature == 1.0 ? logits : ag::scale(logits, 1.0 / temperature);
  };
  const Tensor logp = ag::chunked_head_token_logprobs(
      chunk_head, ag::reshape(x, {n, config_.hidden_size}), targets.reshape({n}),
      head_chunk_rows(n), -100, entropy);  // (N)
  if (entropy) *entropy = entropy->reshape({b, t});
  return ag::reshape(logp, {b, t});
}

bool CausalLM::ignorable_key(const std::string& key) const {
  // A tied head's copy of the embedding (some exporters write it).
  if (config_.tie_word_embeddings && key == "lm_head.weight") return true;
  auto ends_with = [&](std::string_view s) { return key.ends_with(s); };
  if (config_.family == Family::gpt2)  // the causal-mask buffers of old GPT-2 checkpoints
    return key.starts_with("transformer.h.") &&
           (ends_with(".attn.bias") || ends_with(".attn.masked_bias"));
  return ends_with(".self_attn.rotary_emb.inv_freq");  // old Llama checkpoints' RoPE buffer
}

Gpt2LMHeadModel::Gpt2LMHeadModel(const ModelConfig& cfg, const BuildOptions& options)
    : CausalLM(cfg) {
  FG_CHECK(cfg.family == Family::gpt2, "[{}] Gpt2LMHeadModel needs a gpt2 config", cfg.name);
  FG_CHECK(cfg.tie_word_embeddings, "[{}] GPT-2 with an untied lm_head is not supported", cfg.name);
  BuildContext ctx(options);
  body_ = &register_module<Gpt2Model>("transformer", config_, ctx);
}

LlamaForCausalLM::LlamaForCausalLM(const ModelConfig& cfg, const BuildOptions& options)
    : CausalLM(cfg) {
  FG_CHECK(cfg.family == Family::llama, "[{}] LlamaForCausalLM needs a llama-family config",
           cfg.name);
  BuildContext ctx(options);
  body_ = &register_module<LlamaModel>("model", config_, ctx);
  if (!cfg.tie_word_embeddings)
    lm_head_ =
        &register_linear("lm_head", cfg.hidden_size, cfg.vocab_size,
                         Linear::Options{false, Linear::Layout::torch, cfg.initializer_range}, ctx);
}

std::unique_ptr<CausalLM> build_model(const ModelConfig& cfg, const BuildOptions& options) {
  if (cfg.family == Family::gpt2) return std::make_unique<Gpt2LMHeadModel>(cfg, options);
  return std::make_unique<LlamaForCausalLM>(cfg, options);
}

}  // namespace fitgrad::nn
