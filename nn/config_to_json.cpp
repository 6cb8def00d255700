// config_to_json (config.h): a ModelConfig as the config.json transformers reads for its
// model_type, with Hugging Face's key names, for checkpoints and `fitgrad export`.
#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "nn/config.h"
#include "tensor/error.h"

namespace fitgrad::nn {

nlohmann::json config_to_json(const ModelConfig& cfg) {
  cfg.validate();
  nlohmann::json j;
  j["model_type"] = cfg.model_type;
  j["vocab_size"] = cfg.vocab_size;
  j["initializer_range"] = cfg.initializer_range;
  j["tie_word_embeddings"] = cfg.tie_word_embeddings;
  if (cfg.family == Family::gpt2) {
    FG_CHECK(cfg.model_type == "gpt2", "[config {}] a gpt2 config needs model_type gpt2, not '{}'",
             cfg.name, cfg.model_type);
    j["architectures"] = {"GPT2LMHeadModel"};
    j["n_positions"] = cfg.max_position_embeddings;
    j["n_embd"] = cfg.hidden_size;
    j["n_layer"] = cfg.num_layers;
    j["n_head"] = cfg.num_heads;
    j["n_inner"] = cfg.intermediate_size;
    j["layer_norm_epsilon"] = cfg.norm_eps;
    j["activation_function"] = "gelu_new";
    j["embd_pdrop"] = cfg.embd_pdrop;
    j["attn_pdrop"] = cfg.attn_pdrop;
    j["resid_pdrop"] = cfg.resid_pdrop;
    return j;
  }
  const std::string& type = cfg.model_type;
  const bool gemma = type == "gemma2" || type == "gemma3_text";
  FG_CHECK(type == "llama" || type == "mistral" || type == "qwen2" || type == "qwen3" ||
               type == "phi3" || gemma,
           "[config {}] model_type '{}' is not a llama-family type", cfg.name, type);
  FG_CHECK(cfg.qk_norm == (type == "qwen3" || type == "gemma3_text"),
           "[config {}] q/k norms are qwen3's and gemma3's, and theirs only", cfg.name);
  FG_CHECK(cfg.gemma == gemma, "[config {}] Gemma's blocks are gemma2's and gemma3_text's",
           cfg.name);
  j["architectures"] = {type == "llama"     ? "LlamaForCausalLM"
                        : type == "mistral" ? "MistralForCausalLM"
                        : type == "qwen2"   ? "Qwen2ForCausalLM"
                        : type == "phi3"    ? "Phi3ForCausalLM"
                        : type == "gemma2"  ? "Gemma2ForCausalLM"
                        : gemma             ? "Gemma3ForCausalLM"
                                            : "Qwen3ForCausalLM"};
  j["hidden_size"] = cfg.hidden_size;
  j["intermediate_size"] = cfg.intermediate_size;
  j["num_hidden_layers"] = cfg.num_layers;
  j["num_attention_heads"] = cfg.num_heads;
  j["num_key_value_heads"] = cfg.num_kv_heads;
  j["max_position_embeddings"] = cfg.max_position_embeddings;
  j["rms_norm_eps"] = cfg.norm_eps;
  j["rope_theta"] = cfg.rope_theta;
  const RopeScaling& s = cfg.rope_scaling;
  if (s.type == RopeScaling::Type::linear)
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", s.factor}};
  if (s.type == RopeScaling::Type::llama3)
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", s.factor},
                         {"low_freq_factor", s.low_freq_factor},
                         {"high_freq_factor", s.high_freq_factor},
                         {"original_max_position_embeddings", int64_t(s.original_max_position)}};
  if (s.type == RopeScaling::Type::dynamic || s.type == RopeScaling::Type::yarn) {
    j["rope_scaling"] = {{"rope_type", s.type == RopeScaling::Type::yarn ? "yarn" : "dynamic"},
                         {"factor", s.factor},
                         {"original_max_position_embeddings", int64_t(s.original_max_position)}};
    if (s.type == RopeScaling::Type::yarn)
      for (const auto& [k, v] : {std::pair{"attention_factor", s.attention_factor},
                                 {"beta_fast", s.beta_fast},
                                 {"beta_slow", s.beta_slow}})
        j["rope_scaling"][k] = v;
  }
  if (s.type == RopeScaling::Type::longrope) {
    // Phi3Config (transformers 4.46) takes these three keys and no others; an attention
    // factor other than the one max_position_embeddings implies is written as newer ones read it.
    j["rope_scaling"] = {
        {"type", "longrope"},
        {"short_factor", std::vector<float>(s.short_factor, s.short_factor + s.pairs)},
        {"long_factor", std::vector<float>(s.long_factor, s.long_factor + s.pairs)}};
    const double scale = double(cfg.max_position_embeddings) / s.original_max_position;
    const double implied =
        scale <= 1 ? 1.0 : std::sqrt(1 + std::log(scale) / std::log(s.original_max_position));
    if (std::fabs(s.attention_factor - implied) > 1e-12 * implied)
      j["rope_scaling"]["attention_factor"] = s.attention_factor;
    j["original_max_position_embeddings"] = int64_t(s.original_max_position);
  }
  j["hidden_act"] = gemma ? "gelu_pytorch_tanh" : "silu";
  if (gemma) {
    j["hidden_activation"] = "gelu_pytorch_tanh";
    j["query_pre_attn_scalar"] = cfg.query_pre_attn_scalar;
    const auto cap = [](double c) { return c > 0 ? nlohmann::json(c) : nlohmann::json(); };
    j["attn_logit_softcapping"] = cap(cfg.attn_logit_softcapping);
    j["final_logit_softcapping"] = cap(cfg.final_logit_softcapping);
    FG_CHECK(cfg.sliding_window_pattern == (type == "gemma2" ? 2 : cfg.sliding_window_pattern),
             "[config {}] gemma2 slides every other layer", cfg.name);
    if (type == "gemma3_text") {
      j["sliding_window_pattern"] = cfg.sliding_window_pattern;
      j["rope_local_base_freq"] = cfg.rope_local_theta;
    }
  } else {
    FG_CHECK(cfg.sliding_window_pattern == 0 && cfg.query_pre_attn_scalar == 0 &&
                 cfg.attn_logit_softcapping == 0 && cfg.final_logit_softcapping == 0 &&
                 cfg.rope_local_theta == 0,
             "[config {}] patterned windows, soft caps and a local RoPE base are Gemma's",
             cfg.name);
  }
  // Phi3Config's pad_token_id defaults to 32000, an embedding row only its own vocabulary has.
  if (type == "phi3") j["pad_token_id"] = nullptr;
  j["attention_dropout"] = cfg.attn_pdrop;
  if (cfg.head_dim > 0) j["head_dim"] = cfg.head_dim;
  if (type == "qwen2") {
    FG_CHECK(cfg.attention_qkv_bias && !cfg.attention_out_bias && !cfg.mlp_bias,
             "[config {}] qwen2 has q/k/v biases and no o_proj or MLP biases", cfg.name);
  } else {
    FG_CHECK(cfg.attention_qkv_bias == cfg.attention_out_bias,
             "[config {}] {} config.json has one attention_bias for q/k/v and o_proj", cfg.name,
             type);
    j["attention_bias"] = cfg.attention_qkv_bias;
    j["mlp_bias"] = cfg.mlp_bias;
  }
  FG_CHECK(cfg.sliding_window == 0 || type == "mistral" || type == "phi3" || gemma,
           "[config {}] only mistral, phi3 and gemma configs carry a sliding window", cfg.name);
  FG_CHECK(cfg.fused_projections == (type == "phi3"),
           "[config {}] {} config.json cannot say whether q/k/v and gate/up are fused (phi3's are)",
           cfg.name, type);
  if (cfg.sliding_window > 0) j["sliding_window"] = cfg.sliding_window;
  return j;
}

}  // namespace fitgrad::nn
