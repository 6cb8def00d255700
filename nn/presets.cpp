// The model presets (config.h, Note [Preset numbers]): each copies its model's published
// config.json. Declared in config.h.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "nn/config.h"
#include "tensor/error.h"

namespace fitgrad::nn {

namespace {

ModelConfig gpt2(std::string name, int64_t vocab, int64_t ctx, int64_t layers, int64_t c,
                 int64_t heads) {
  ModelConfig m;
  m.name = std::move(name);
  m.model_type = "gpt2";
  m.family = Family::gpt2;
  m.vocab_size = vocab;
  m.max_position_embeddings = ctx;
  m.num_layers = layers;
  m.hidden_size = c;
  m.intermediate_size = 4 * c;
  m.num_heads = m.num_kv_heads = heads;
  m.norm_eps = 1e-5;
  m.tie_word_embeddings = true;
  m.attention_qkv_bias = m.attention_out_bias = m.mlp_bias = true;
  return m;
}

struct LlamaShape {
  int64_t vocab, ctx, layers, hidden, intermediate, heads, kv_heads;
  double eps, theta;
  bool tied;
};

ModelConfig llama(std::string name, std::string type, const LlamaShape& s) {
  ModelConfig m;
  m.name = std::move(name);
  m.model_type = std::move(type);
  m.family = Family::llama;
  m.vocab_size = s.vocab;
  m.max_position_embeddings = s.ctx;
  m.num_layers = s.layers;
  m.hidden_size = s.hidden;
  m.intermediate_size = s.intermediate;
  m.num_heads = s.heads;
  m.num_kv_heads = s.kv_heads;
  m.norm_eps = s.eps;
  m.rope_theta = s.theta;
  m.tie_word_embeddings = s.tied;
  return m;
}

ModelConfig with_gpt2_dropout(ModelConfig m) {
  m.embd_pdrop = m.attn_pdrop = m.resid_pdrop = 0.1;
  return m;
}

}  // namespace

// Note [Preset numbers] in config.h.
std::vector<std::string> preset_names() {
  return {"gpt2-tiny",  "gpt2",       "gpt2-medium", "llama-tiny",  "smollm2-135m",
          "llama2-7b",  "llama3-8b",  "llama3.1-8b", "llama3.2-1b", "llama3.2-3b",
          "qwen2.5-7b", "qwen3-8b",   "mistral-7b",  "phi-3-mini",  "gemma-2-9b",
          "gemma-3-4b", "llama2-13b", "llama-30b",   "llama2-70b"};
}

ModelConfig preset(std::string_view name) {
  // GPT-2 (openai-community/gpt2, gpt2-medium): n_positions 1024, layer_norm_epsilon 1e-5.
  if (name == "gpt2-tiny") return gpt2("gpt2-tiny", 256, 64, 2, 64, 4);
  // The published GPT-2 configs carry dropout 0.1 (Note [Dropout as configured]); the tiny
  // test presets have none.
  if (name == "gpt2") return with_gpt2_dropout(gpt2("gpt2", 50257, 1024, 12, 768, 12));
  if (name == "gpt2-medium")
    return with_gpt2_dropout(gpt2("gpt2-medium", 50257, 1024, 24, 1024, 16));
  //                                vocab   ctx     L   hidden inter  H   KV  eps   theta   tied
  if (name == "llama-tiny")
    return llama("llama-tiny", "llama", {256, 64, 2, 64, 176, 4, 2, 1e-5, 10000, false});
  if (name == "smollm2-135m")  // HuggingFaceTB/SmolLM2-135M
    return llama("smollm2-135m", "llama", {49152, 8192, 30, 576, 1536, 9, 3, 1e-5, 100000, true});
  if (name == "llama2-7b")  // meta-llama/Llama-2-7b-hf
    return llama("llama2-7b", "llama", {32000, 4096, 32, 4096, 11008, 32, 32, 1e-5, 10000, false});
  if (name == "llama3-8b")  // meta-llama/Meta-Llama-3-8B
    return llama("llama3-8b", "llama", {128256, 8192, 32, 4096, 14336, 32, 8, 1e-5, 500000, false});
  // Llama 3.1 and 3.2: rope_scaling llama3 (low 1, high 4, original context 8192).
  const auto llama31 = [](std::string n, const LlamaShape& s, double factor) {
    ModelConfig m = llama(std::move(n), "llama", s);
    m.rope_scaling = {RopeScaling::Type::llama3, factor, 1.0, 4.0, 8192.0};
    return m;
  };
  if (name == "llama3.1-8b")  // meta-llama/Llama-3.1-8B
    return llama31("llama3.1-8b", {128256, 131072, 32, 4096, 14336, 32, 8, 1e-5, 500000, false},
                   8.0);
  if (name == "llama3.2-1b")  // meta-llama/Llama-3.2-1B
    return llama31("llama3.2-1b", {128256, 131072, 16, 2048, 8192, 32, 8, 1e-5, 500000, true},
                   32.0);
  if (name == "llama3.2-3b")  // meta-llama/Llama-3.2-3B
    return llama31("llama3.2-3b", {128256, 131072, 28, 3072, 8192, 24, 8, 1e-5, 500000, true},
                   32.0);
  if (name == "qwen2.5-7b") {  // Qwen/Qwen2.5-7B
    ModelConfig m =
        llama("qwen2.5-7b", "qwen2", {152064, 131072, 28, 3584, 18944, 28, 4, 1e-6, 1e6, false});
    m.attention_qkv_bias = true;
    return m;
  }
  if (name == "qwen3-8b") {  // Qwen/Qwen3-8B
    ModelConfig m =
        llama("qwen3-8b", "qwen3", {151936, 40960, 36, 4096, 12288, 32, 8, 1e-6, 1e6, false});
    m.head_dim = 128;
    m.qk_norm = true;
    return m;
  }
  if (name == "mistral-7b") {  // mistralai/Mistral-7B-v0.1
    ModelConfig m =
        llama("mistral-7b", "mistral", {32000, 32768, 32, 4096, 14336, 32, 8, 1e-5, 10000, false});
    m.sliding_window = 4096;
    return m;
  }
  if (name == "phi-3-mini") {  // microsoft/Phi-3-mini-4k-instruct
    ModelConfig m =
        llama("phi-3-mini", "phi3", {32064, 4096, 32, 3072, 8192, 32, 32, 1e-5, 10000, false});
    m.sliding_window = 2047;
    m.fused_projections = true;
    return m;
  }
  if (name == "gemma-2-9b") {  // google/gemma-2-9b
    ModelConfig m =
        llama("gemma-2-9b", "gemma2", {256000, 8192, 42, 3584, 14336, 16, 8, 1e-6, 10000, true});
    m.head_dim = 256;
    m.gemma = true;
    m.query_pre_attn_scalar = 256;
    m.attn_logit_softcapping = 50;
    m.final_logit_softcapping = 30;
    m.sliding_window = 4096;
    m.sliding_window_pattern = 2;
    return m;
  }
  if (name == "gemma-3-4b") {  // google/gemma-3-4b-pt's text_config (the language model)
    ModelConfig m = llama("gemma-3-4b", "gemma3_text",
                          {262208, 131072, 34, 2560, 10240, 8, 4, 1e-6, 1e6, true});
    m.head_dim = 256;
    m.gemma = true;
    m.qk_norm = true;
    m.query_pre_attn_scalar = 256;
    m.sliding_window = 1024;
    m.sliding_window_pattern = 6;
    m.rope_local_theta = 10000;
    m.rope_scaling.type = RopeScaling::Type::linear;
    m.rope_scaling.factor = 8;
    return m;
  }
  if (name == "llama2-13b")  // meta-llama/Llama-2-13b-hf
    return llama("llama2-13b", "llama", {32000, 4096, 40, 5120, 13824, 40, 40, 1e-5, 10000, false});
  if (name == "llama-30b")  // LLaMA 1 "30B" (published as 33B: huggyllama/llama-30b)
    return llama("llama-30b", "llama", {32000, 2048, 60, 6656, 17920, 52, 52, 1e-6, 10000, false});
  if (name == "llama2-70b")  // meta-llama/Llama-2-70b-hf
    return llama("llama2-70b", "llama", {32000, 4096, 80, 8192, 28672, 64, 8, 1e-5, 10000, false});
  std::string known;
  for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error(fmt::format("[config] unknown preset '{}' (known: {})", name, known));
}

}  // namespace fitgrad::nn
