// ModelConfig presets and the Hugging Face config.json reader (nn/config.h): a llama,
// mistral, qwen2 and gpt2 config.json as published are read into the right fields, and
// malformed ones fail with errors that name the file and the key.
#include "nn/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tensor/error.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::nn {
namespace {

// Writes `text` to a fresh file in the temp dir and returns its path.
std::string write_temp(const std::string& stem, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("fitgrad_nn_" + stem + "_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << text;
  return path.string();
}

// The error message of f(), or "" when it does not throw fitgrad::Error.
using fitgrad::testing::error_of;

// meta-llama/Llama-2-7b-hf config.json.
constexpr const char* kLlama2 = R"({
  "_name_or_path": "meta-llama/Llama-2-7b-hf",
  "architectures": ["LlamaForCausalLM"],
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 11008,
  "max_position_embeddings": 4096,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 32,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "tie_word_embeddings": false,
  "torch_dtype": "float16",
  "transformers_version": "4.31.0.dev0",
  "use_cache": true,
  "vocab_size": 32000
})";

// mistralai/Mistral-7B-v0.1 config.json.
constexpr const char* kMistral = R"({
  "architectures": ["MistralForCausalLM"],
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 32768,
  "model_type": "mistral",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05,
  "rope_theta": 10000.0,
  "sliding_window": 4096,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.34.0.dev0",
  "use_cache": true,
  "vocab_size": 32000
})";

// Qwen/Qwen2-0.5B config.json.
constexpr const char* kQwen2 = R"({
  "architectures": ["Qwen2ForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151643,
  "hidden_act": "silu",
  "hidden_size": 896,
  "initializer_range": 0.02,
  "intermediate_size": 4864,
  "max_position_embeddings": 131072,
  "max_window_layers": 24,
  "model_type": "qwen2",
  "num_attention_heads": 14,
  "num_hidden_layers": 24,
  "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 131072,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.40.1",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";

// openai-community/gpt2 config.json.
constexpr const char* kGpt2 = R"({
  "activation_function": "gelu_new",
  "architectures": ["GPT2LMHeadModel"],
  "attn_pdrop": 0.1,
  "bos_token_id": 50256,
  "embd_pdrop": 0.1,
  "eos_token_id": 50256,
  "initializer_range": 0.02,
  "layer_norm_epsilon": 1e-05,
  "model_type": "gpt2",
  "n_ctx": 1024,
  "n_embd": 768,
  "n_head": 12,
  "n_layer": 12,
  "n_positions": 1024,
  "resid_pdrop": 0.1,
  "summary_activation": null,
  "summary_first_dropout": 0.1,
  "summary_proj_to_labels": true,
  "summary_type": "cls_index",
  "summary_use_proj": true,
  "task_specific_params": {"text-generation": {"do_sample": true, "max_length": 50}},
  "vocab_size": 50257
})";

TEST(NnConfig, EveryPresetValidatesAndUnknownPresetsAreNamed) {
  for (const auto& name : preset_names()) {
    const ModelConfig c = preset(name);
    EXPECT_EQ(c.name, name);
    EXPECT_NO_THROW(c.validate()) << name;
  }
  const std::string msg = error_of([] { preset("llama4-1t"); });
  EXPECT_NE(msg.find("unknown preset 'llama4-1t'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("smollm2-135m"), std::string::npos) << msg;
}

TEST(NnConfig, ReadsLlama2ConfigJson) {
  const std::string path = write_temp("llama2", kLlama2);
  const ModelConfig c = load_config_json(path);
  std::filesystem::remove(path);
  EXPECT_EQ(c.family, Family::llama);
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 11008);
  EXPECT_EQ(c.num_layers, 32);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 32);
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);  // absent: Hugging Face's default
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_qkv_bias);
  EXPECT_EQ(c.num_parameters(), preset("llama2-7b").num_parameters());
  EXPECT_EQ(c.num_parameters(), 6'738'415'616);
}

// Llama 3.1's rope_scaling as its config.json has it, transformers 5's rope_parameters (which
// carries rope_theta), a linear scaling in the older "type" spelling, and the round trip of
// each through config_to_json.
TEST(NnConfig, ReadsRopeScaling) {
  nlohmann::json j = nlohmann::json::parse(kLlama2);
  j["rope_theta"] = 500000.0;
  j["rope_scaling"] = {{"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192},
                       {"rope_type", "llama3"}};
  const ModelConfig llama31 = config_from_json(j, "llama3.1.json");
  EXPECT_EQ(llama31.rope_scaling.type, RopeScaling::Type::llama3);
  EXPECT_DOUBLE_EQ(llama31.rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(llama31.rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(llama31.rope_scaling.high_freq_factor, 4.0);
  EXPECT_DOUBLE_EQ(llama31.rope_scaling.original_max_position, 8192.0);
  EXPECT_DOUBLE_EQ(llama31.rope_theta, 500000.0);
  EXPECT_EQ(config_from_json(config_to_json(llama31), "again"), [&] {
    ModelConfig c = llama31;
    c.name = c.model_type;
    return c;
  }());

  nlohmann::json v5 = nlohmann::json::parse(kLlama2);
  v5.erase("rope_theta");
  v5["rope_parameters"] = j["rope_scaling"];
  v5["rope_parameters"]["rope_theta"] = 500000.0;
  const ModelConfig from_v5 = config_from_json(v5, "v5.json");
  EXPECT_EQ(from_v5.rope_scaling, llama31.rope_scaling);
  EXPECT_DOUBLE_EQ(from_v5.rope_theta, 500000.0);

  nlohmann::json plain = nlohmann::json::parse(kLlama2);
  plain["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 250000.0}};
  const ModelConfig unscaled = config_from_json(plain, "default.json");
  EXPECT_EQ(unscaled.rope_scaling.type, RopeScaling::Type::none);
  EXPECT_DOUBLE_EQ(unscaled.rope_theta, 250000.0);

  nlohmann::json linear = nlohmann::json::parse(kLlama2);
  linear["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  const ModelConfig lin = config_from_json(linear, "linear.json");
  EXPECT_EQ(lin.rope_scaling.type, RopeScaling::Type::linear);
  EXPECT_DOUBLE_EQ(lin.rope_scaling.factor, 4.0);
  EXPECT_EQ(config_from_json(config_to_json(lin), "again").rope_scaling, lin.rope_scaling);
}

TEST(NnConfig, ReadsMistralConfigJson) {
  const ModelConfig c = config_from_json(nlohmann::json::parse(kMistral), "mistral.json");
  EXPECT_EQ(c.model_type, "mistral");
  EXPECT_EQ(c.family, Family::llama);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.intermediate_size, 14336);
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.max_position_embeddings, 32768);
  EXPECT_EQ(c.num_parameters(), 7'241'732'096);
}

TEST(NnConfig, ReadsQwen2ConfigJsonWithQkvBias) {
  const ModelConfig c = config_from_json(nlohmann::json::parse(kQwen2), "qwen2.json");
  EXPECT_EQ(c.model_type, "qwen2");
  EXPECT_EQ(c.family, Family::llama);
  EXPECT_TRUE(c.attention_qkv_bias);
  EXPECT_FALSE(c.attention_out_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.num_heads, 14);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.resolved_head_dim(), 64);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-6);
  EXPECT_EQ(c.num_parameters(), 494'032'768);  // Qwen2-0.5B's published count
}

TEST(NnConfig, ReadsGpt2ConfigJson) {
  const std::string path = write_temp("gpt2", kGpt2);
  const ModelConfig c = load_config_json(path);
  std::filesystem::remove(path);
  EXPECT_EQ(c.family, Family::gpt2);
  EXPECT_EQ(c.vocab_size, 50257);
  EXPECT_EQ(c.hidden_size, 768);
  EXPECT_EQ(c.intermediate_size, 4 * 768);  // n_inner absent
  EXPECT_EQ(c.num_layers, 12);
  EXPECT_EQ(c.num_heads, 12);
  EXPECT_EQ(c.max_position_embeddings, 1024);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.attention_qkv_bias && c.attention_out_bias && c.mlp_bias);
  EXPECT_EQ(c.num_parameters(), 124'439'808);
}

struct BadConfig {
  const char* what;
  const char* base;
  const char* key;     // edited key
  const char* value;   // JSON text of its new value; nullptr erases it
  const char* expect;  // substring of the error
};

// Gemma 2's published configs also carry sliding_window_size; newer ones list layer_types,
// which must agree with the pattern.
TEST(NnConfig, ReadsGemmaWindowKeys) {
  const std::string golden = std::string(FITGRAD_GOLDEN_DIR) + "/hf_gemma2_tiny/model/config.json";
  nlohmann::json j = nlohmann::json::parse(std::ifstream(golden));
  j["sliding_window_size"] = 7;
  j["layer_types"] = {"sliding_attention", "full_attention"};
  const ModelConfig c = config_from_json(j, "gemma2.json");
  EXPECT_TRUE(c.layer_slides(0));
  EXPECT_FALSE(c.layer_slides(1));
  EXPECT_EQ(c.attn_logit_softcapping, 1.0);
  j["layer_types"] = {"full_attention", "full_attention"};
  fitgrad::testing::expect_error([&] { config_from_json(j, "gemma2.json"); },
                                 "[config gemma2.json]",
                                 "key 'layer_types' gives layer 0 \"full_attention\"");
  j.erase("layer_types");
  j["attn_logit_softcapping"] = nullptr;  // null is none, absence Gemma2Config's 50
  EXPECT_EQ(config_from_json(j, "gemma2.json").attn_logit_softcapping, 0.0);
  j.erase("attn_logit_softcapping");
  EXPECT_EQ(config_from_json(j, "gemma2.json").attn_logit_softcapping, 50.0);
}

TEST(NnConfig, MalformedConfigsNameTheFileAndKey) {
  const BadConfig cases[] = {
      {"missing hidden_size", kLlama2, "hidden_size", nullptr, "missing key 'hidden_size'"},
      {"missing n_embd", kGpt2, "n_embd", nullptr, "missing key 'n_embd'"},
      {"missing rms_norm_eps", kMistral, "rms_norm_eps", nullptr, "missing key 'rms_norm_eps'"},
      {"missing model_type", kQwen2, "model_type", nullptr, "missing key 'model_type'"},
      {"unknown model_type", kLlama2, "model_type", "\"bert\"", "key 'model_type' is 'bert'"},
      {"unknown key", kLlama2, "quantization_config", "{\"bits\": 4}",
       "unknown key 'quantization_config'"},
      {"unknown key gpt2", kGpt2, "n_experts", "8", "unknown key 'n_experts'"},
      {"wrong type", kLlama2, "num_hidden_layers", "\"32\"",
       "key 'num_hidden_layers' must be an integer"},
      // Note [Reading RoPE scaling].
      {"mrope", kLlama2, "rope_scaling", "{\"rope_type\": \"mrope\", \"factor\": 4.0}",
       "key 'rope_scaling' has rope_type 'mrope'"},
      {"yarn mscale", kLlama2, "rope_scaling",
       "{\"rope_type\": \"yarn\", \"factor\": 4.0, \"mscale\": 0.7}",
       "key 'rope_scaling.mscale' is not used by rope_type 'yarn'"},
      {"scaling factor below 1", kLlama2, "rope_scaling", "{\"type\": \"linear\", \"factor\": 0.5}",
       "key 'rope_scaling.factor' is 0.5; it must be at least 1"},
      {"llama3 without its keys", kLlama2, "rope_scaling",
       "{\"rope_type\": \"llama3\", \"factor\": 8.0}",
       "key 'rope_scaling' lacks 'low_freq_factor'"},
      {"a key the type does not use", kLlama2, "rope_scaling",
       "{\"rope_type\": \"linear\", \"factor\": 2.0, \"beta_fast\": 32}",
       "key 'rope_scaling.beta_fast' is not used by rope_type 'linear'"},
      {"two types", kLlama2, "rope_scaling",
       "{\"type\": \"linear\", \"rope_type\": \"llama3\", \"factor\": 2.0}",
       "gives two types, 'linear' and 'llama3'"},
      {"not an object", kLlama2, "rope_parameters", "8", "key 'rope_parameters' must be an object"},
      {"gelu act in llama", kMistral, "hidden_act", "\"gelu\"", "key 'hidden_act' is 'gelu'"},
      {"exact gelu gpt2", kGpt2, "activation_function", "\"gelu\"", "key 'activation_function'"},
      {"qwen2 sliding window", kQwen2, "use_sliding_window", "true", "key 'use_sliding_window'"},
      // Errors name the file's own keys (Note [Errors name the file's keys]).
      {"heads do not divide", kLlama2, "num_key_value_heads", "5", "num_key_value_heads = 5"},
      {"gpt2 heads do not divide", kGpt2, "n_head", "5",
       "n_embd = 768 is not a multiple of n_head = 5"},
      {"gpt2 no heads", kGpt2, "n_head", "0", "n_head must be positive, got 0"},
      {"gpt2 no positions", kGpt2, "n_positions", "0", "n_positions must be positive"},
      {"gpt2 bad eps", kGpt2, "layer_norm_epsilon", "0", "layer_norm_epsilon must be positive"},
      // Found by fuzz/config_json_fuzz.cpp: these overflowed int64 (4 * n_embd, the
      // parameter count) before Note [Size bounds].
      {"size past 2^31", kGpt2, "n_embd", "4611686018427387904",
       "n_embd = 4611686018427387904 is too large"},
      {"default n_inner past 2^31", kGpt2, "n_embd", "1073741824",
       "n_inner (4 * n_embd when not given) = 4294967296 is too large"},
      // Absurd configs are refused before anything is built (issue 31).
      {"hidden 2^40", kGpt2, "n_embd", "1099511627776", "n_embd = 1099511627776 is too large"},
      {"100,000 gpt2 layers", kGpt2, "n_layer", "100000", "n_layer = 100000 is too many layers"},
      {"100,000 llama layers", kLlama2, "num_hidden_layers", "100000",
       "num_hidden_layers = 100000 is too many layers"},
      {"parameter count past 2^40", kLlama2, "hidden_size", "2147483648",
       "parameters, more than 2^40"},
      {"gpt2 parameter count past 2^40", kGpt2, "n_embd", "1048572",
       "parameters, more than 2^40: 512 GiB even in 4 bits, beyond any card (n_layer = 12, "
       "n_embd = 1048572"},
  };
  for (const auto& c : cases) {
    nlohmann::json j = nlohmann::json::parse(c.base);
    if (c.value)
      j[c.key] = nlohmann::json::parse(c.value);
    else
      j.erase(c.key);
    const std::string path = write_temp("bad", j.dump(2));
    const std::string msg = error_of([&] { load_config_json(path); });
    std::filesystem::remove(path);
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.what << ": " << msg;
    EXPECT_NE(msg.find("[config " + path + "]"), std::string::npos) << c.what << ": " << msg;
    if (std::string(c.base) == kGpt2) {  // never the internal names of another family's keys
      for (const char* internal : {"hidden_size", "intermediate_size", "num_layers", "num_heads"})
        EXPECT_EQ(msg.find(internal), std::string::npos) << c.what << ": " << msg;
    }
  }
}

TEST(NnConfig, UnreadableFilesAreNamed) {
  const std::string missing = "/nonexistent/fitgrad/config.json";
  EXPECT_NE(error_of([&] { load_config_json(missing); }).find("[config " + missing + "]"),
            std::string::npos);
  const std::string path = write_temp("broken", "{\"model_type\": ");
  const std::string msg = error_of([&] { load_config_json(path); });
  std::filesystem::remove(path);
  EXPECT_NE(msg.find("[config " + path + "] invalid JSON"), std::string::npos) << msg;
}

}  // namespace
}  // namespace fitgrad::nn
