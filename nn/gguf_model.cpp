// config_from_gguf and load_gguf_model: see Note [GGUF model config] in gguf_model.h.
#include "nn/gguf_model.h"

#include <map>

#include "nn/llama_names.h"
#include "nn/peft_load.h"
#include "tensor/error.h"

namespace fitgrad::nn {

ModelConfig config_from_gguf(const io::GgufFile& file) {
  const io::GgufMetadata& meta = file.metadata();
  const std::string where = "[gguf " + file.path() + "]";
  const std::string& arch = meta.get_string("general.architecture");
  FG_CHECK(arch == "llama",
           "{} general.architecture is '{}'; fitgrad reads llama-architecture GGUF models only",
           where, arch);
  auto key = [](const char* k) { return std::string("llama.") + k; };

  ModelConfig m;
  m.name = meta.has("general.name") ? meta.get_string("general.name") : arch;
  m.model_type = "llama";
  m.family = Family::llama;
  m.max_position_embeddings = meta.get_u64(key("context_length"));
  m.hidden_size = meta.get_u64(key("embedding_length"));
  m.intermediate_size = meta.get_u64(key("feed_forward_length"));
  m.num_layers = meta.get_u64(key("block_count"));
  m.num_heads = meta.get_u64(key("attention.head_count"));
  m.num_kv_heads = meta.has(key("attention.head_count_kv"))
                       ? int64_t(meta.get_u64(key("attention.head_count_kv")))
                       : m.num_heads;
  m.norm_eps = meta.get_f32(key("attention.layer_norm_rms_epsilon"));
  if (meta.has(key("rope.freq_base"))) m.rope_theta = meta.get_f32(key("rope.freq_base"));
  if (meta.has(key("attention.key_length"))) {
    m.head_dim = meta.get_u64(key("attention.key_length"));
    if (meta.has(key("attention.value_length")))
      FG_CHECK(meta.get_u64(key("attention.value_length")) == uint64_t(m.head_dim),
               "{} llama.attention.value_length = {} differs from key_length = {}", where,
               meta.get_u64(key("attention.value_length")), m.head_dim);
  }

  FG_CHECK(file.has_tensor("token_embd.weight"), "{} tensor 'token_embd.weight' is missing", where);
  const Shape embd = file.info("token_embd.weight").shape();
  FG_CHECK(embd.size() == 2, "{} tensor 'token_embd.weight' must be 2-d, got {} dims", where,
           embd.size());
  m.vocab_size = embd[0];
  if (meta.has(key("vocab_size")))
    FG_CHECK(int64_t(meta.get_u64(key("vocab_size"))) == m.vocab_size,
             "{} llama.vocab_size = {} but token_embd.weight has {} rows", where,
             meta.get_u64(key("vocab_size")), m.vocab_size);
  if (meta.has("tokenizer.ggml.tokens")) {
    const size_t n_tokens = meta.get("tokenizer.ggml.tokens").size();
    FG_CHECK(int64_t(n_tokens) <= m.vocab_size,
             "{} tokenizer.ggml.tokens has {} tokens but token_embd.weight only {} rows", where,
             n_tokens, m.vocab_size);
  }
  m.tie_word_embeddings = !file.has_tensor("output.weight");
  m.attention_qkv_bias = file.has_tensor("blk.0.attn_q.bias");
  m.attention_out_bias = file.has_tensor("blk.0.attn_output.bias");
  m.mlp_bias = file.has_tensor("blk.0.ffn_up.bias");

  if (meta.has(key("rope.scaling.type"))) {
    const std::string& scaling = meta.get_string(key("rope.scaling.type"));
    FG_CHECK(scaling == "none", "{} llama.rope.scaling.type is '{}'; RoPE scaling is not supported",
             where, scaling);
  }
  FG_CHECK(!file.has_tensor("rope_freqs.weight"),
           "{} tensor 'rope_freqs.weight' (Llama 3.1 RoPE scaling) is not supported", where);
  FG_CHECK(!meta.has(key("expert_count")) || meta.get_u64(key("expert_count")) == 0,
           "{} llama.expert_count = {}: mixture-of-experts models are not supported", where,
           meta.has(key("expert_count")) ? meta.get_u64(key("expert_count")) : 0);

  m.validate(where);
  if (meta.has(key("rope.dimension_count")))
    FG_CHECK(int64_t(meta.get_u64(key("rope.dimension_count"))) == m.resolved_head_dim(),
             "{} llama.rope.dimension_count = {} differs from head_dim = {} (partial rotary "
             "embeddings are not supported)",
             where, meta.get_u64(key("rope.dimension_count")), m.resolved_head_dim());
  return m;
}

std::unique_ptr<CausalLM> load_gguf_model(const io::GgufFile& file, const BuildOptions& options) {
  const ModelConfig cfg = config_from_gguf(file);
  BuildOptions build = options;
  build.initialize = false;
  std::unique_ptr<CausalLM> model = build_model(cfg, build);
  // One tensor decoded at a time (Note [Streaming loads]); plain Module::load unless the
  // build adapted or quantized layers.
  load_into_adapted(*model, llama_gguf_source(file, options.dtype));
  return model;
}

std::unique_ptr<CausalLM> load_gguf_model(const std::string& path, const BuildOptions& options) {
  return load_gguf_model(io::GgufFile::open(path), options);
}

}  // namespace fitgrad::nn
