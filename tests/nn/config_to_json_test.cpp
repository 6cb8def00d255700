// config_to_json (nn/config.h): every preset, and qwen2 and head_dim variants, read back
// through config_from_json to the same ModelConfig; the keys are Hugging Face's (checked
// against the published GPT-2 and SmolLM2 config.json values); and configs that no
// config.json can express are refused.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "nn/config.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::nn {
namespace {

using fitgrad::testing::expect_error;

// config_from_json(config_to_json(c)), with the name (which a config.json lacks) put back.
ModelConfig round_trip(const ModelConfig& c) {
  ModelConfig back = config_from_json(config_to_json(c), "round-trip");
  EXPECT_EQ(back.name, c.model_type);
  back.name = c.name;
  return back;
}

TEST(ConfigToJson, EveryPresetRoundTrips) {
  for (const std::string& name : preset_names()) {
    const ModelConfig c = preset(name);
    EXPECT_TRUE(round_trip(c) == c) << name << ": " << config_to_json(c).dump();
  }
}

TEST(ConfigToJson, VariantsRoundTrip) {
  ModelConfig qwen = preset("llama-tiny");
  qwen.model_type = "qwen2";
  qwen.attention_qkv_bias = true;
  qwen.tie_word_embeddings = true;
  ModelConfig wide = preset("llama-tiny");
  wide.head_dim = 32;  // 4 heads x 32 != hidden 64
  wide.attention_qkv_bias = wide.attention_out_bias = wide.mlp_bias = true;
  wide.initializer_range = 0.006;
  wide.norm_eps = 1e-6;
  ModelConfig gpt = preset("gpt2-tiny");
  gpt.intermediate_size = 100;
  for (const ModelConfig& c : {qwen, wide, gpt})
    EXPECT_TRUE(round_trip(c) == c) << config_to_json(c).dump();
}

// Phi-3's longrope (two lists, its context and attention factor) and fused projections, as
// tests/golden/hf_phi3_tiny's config.json gives them; what is written is what transformers
// 4.46's Phi3Config accepts: three rope_scaling keys and a pad_token_id inside the vocabulary.
TEST(ConfigToJson, Phi3LongRopeRoundTrips) {
  const std::string path = std::string(FITGRAD_GOLDEN_DIR) + "/hf_phi3_tiny/model/config.json";
  const ModelConfig c = config_from_json(nlohmann::json::parse(std::ifstream(path)), path);
  EXPECT_TRUE(round_trip(c) == c);
  const nlohmann::json j = config_to_json(c);
  EXPECT_EQ(j.at("rope_scaling").size(), 3u) << j.dump();
  EXPECT_EQ(j.at("original_max_position_embeddings"), 32);
  EXPECT_TRUE(j.at("pad_token_id").is_null());
  EXPECT_EQ(j.at("architectures"), nlohmann::json::array({"Phi3ForCausalLM"}));
}

TEST(ConfigToJson, KeysAreHuggingFaces) {
  // openai-community/gpt2 config.json.
  const nlohmann::json g = config_to_json(preset("gpt2"));
  EXPECT_EQ(g.at("model_type"), "gpt2");
  EXPECT_EQ(g.at("architectures"), nlohmann::json::array({"GPT2LMHeadModel"}));
  EXPECT_EQ(g.at("n_embd"), 768);
  EXPECT_EQ(g.at("n_layer"), 12);
  EXPECT_EQ(g.at("n_head"), 12);
  EXPECT_EQ(g.at("n_positions"), 1024);
  EXPECT_EQ(g.at("vocab_size"), 50257);
  EXPECT_EQ(g.at("layer_norm_epsilon"), 1e-5);
  EXPECT_EQ(g.at("activation_function"), "gelu_new");
  // HuggingFaceTB/SmolLM2-135M config.json.
  const nlohmann::json s = config_to_json(preset("smollm2-135m"));
  EXPECT_EQ(s.at("model_type"), "llama");
  EXPECT_EQ(s.at("architectures"), nlohmann::json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(s.at("hidden_size"), 576);
  EXPECT_EQ(s.at("intermediate_size"), 1536);
  EXPECT_EQ(s.at("num_hidden_layers"), 30);
  EXPECT_EQ(s.at("num_attention_heads"), 9);
  EXPECT_EQ(s.at("num_key_value_heads"), 3);
  EXPECT_EQ(s.at("max_position_embeddings"), 8192);
  EXPECT_EQ(s.at("rope_theta"), 100000.0);
  EXPECT_EQ(s.at("rms_norm_eps"), 1e-5);
  EXPECT_EQ(s.at("tie_word_embeddings"), true);
  EXPECT_EQ(s.at("hidden_act"), "silu");
  EXPECT_FALSE(s.contains("head_dim"));
  EXPECT_EQ(config_to_json(preset("mistral-7b")).at("sliding_window"), 4096);
}

TEST(ConfigToJson, RefusesWhatNoConfigJsonExpresses) {
  ModelConfig c = preset("llama-tiny");
  c.attention_qkv_bias = true;  // o_proj without bias: only qwen2 has that
  expect_error([&] { config_to_json(c); }, "[config llama-tiny]", "one attention_bias");
  c = preset("llama-tiny");
  c.sliding_window = 16;
  expect_error([&] { config_to_json(c); }, "[config llama-tiny]", "only mistral");
}

}  // namespace
}  // namespace fitgrad::nn
