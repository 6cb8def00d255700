// nn::config_from_gguf and nn::load_gguf_model on small GGUF files written here byte by
// byte (the layout in io/gguf.h): a random llama-tiny model saved the way llama.cpp's
// converter does (llama.* metadata, blk.N.* names, q/k rows permuted, F32 data) loads back
// into the same parameters and the same logits, tied and untied; and every fault of
// Note [GGUF model config] has an error naming the file and the fault.
#include "nn/gguf_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "nn/llama_names.h"
#include "tensor/error.h"
#include "tests/nn/gguf_fixture.h"

namespace fitgrad::nn {
namespace {

using testing::as_llama_cpp;
using testing::GgufSpec;
using testing::kv_f32;
using testing::kv_str;
using testing::kv_u32;
using testing::write_gguf;

ModelConfig tiny(bool tied) {
  ModelConfig cfg = preset("llama-tiny");  // 2 layers, d 64, 4 heads, 2 kv heads (GQA)
  cfg.tie_word_embeddings = tied;
  cfg.rope_theta = 500000;
  return cfg;
}

std::unique_ptr<CausalLM> random_model(const ModelConfig& cfg) {
  BuildOptions options;
  options.seed = 7;
  return build_model(cfg, options);
}

std::vector<float> logits_of(const CausalLM& m) {
  autograd::NoGradGuard no_grad;
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 24; ++i) ids.push_back((i * 37 + 5) % m.config().vocab_size);
  return m.forward(Tensor::from_vector(ids, {1, 24}, DType::i64)).to_vector<float>();
}

TEST(GgufModel, LlamaCppLayoutLoadsBackExactly) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    const auto original = random_model(tiny(tied));
    const GgufSpec spec = as_llama_cpp(*original);
    EXPECT_EQ(spec.tensors.count("output.weight"), tied ? 0u : 1u);
    const std::string path = write_gguf(tied ? "tied" : "untied", spec);

    const ModelConfig cfg = config_from_gguf(io::GgufFile::open(path));
    EXPECT_EQ(cfg.name, "tiny");
    EXPECT_EQ(cfg.family, Family::llama);
    EXPECT_EQ(cfg.vocab_size, 256);
    EXPECT_EQ(cfg.hidden_size, 64);
    EXPECT_EQ(cfg.intermediate_size, 176);
    EXPECT_EQ(cfg.num_layers, 2);
    EXPECT_EQ(cfg.num_heads, 4);
    EXPECT_EQ(cfg.num_kv_heads, 2);
    EXPECT_EQ(cfg.max_position_embeddings, 64);
    EXPECT_EQ(cfg.norm_eps, double(1e-5f));
    EXPECT_EQ(cfg.rope_theta, 500000.0);
    EXPECT_EQ(cfg.tie_word_embeddings, tied);

    BuildOptions options;
    options.seed = 99;  // ignored: nothing is drawn, everything comes from the file
    const auto loaded = load_gguf_model(path, options);
    for (const auto& [name, w] : original->named_parameters())
      EXPECT_EQ(loaded->parameter(name).to_vector<float>(), w.to_vector<float>()) << name;
    EXPECT_EQ(logits_of(*loaded), logits_of(*original));
  }
}

TEST(GgufModel, Bf16Dtype) {
  const auto original = random_model(tiny(true));
  const std::string path = write_gguf("bf16", as_llama_cpp(*original));
  BuildOptions options;
  options.dtype = DType::bf16;
  const auto loaded = load_gguf_model(path, options);
  const Tensor w = loaded->parameter("model.layers.1.mlp.down_proj.weight");
  EXPECT_EQ(w.dtype(), DType::bf16);
  const auto want = original->parameter("model.layers.1.mlp.down_proj.weight").to_vector<float>();
  const auto got = w.to(DType::f32).to_vector<float>();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-2 * std::abs(want[i]));
}

// Llama 3.1's rope_scaling as llama.cpp's converter writes it (rope_freqs.weight: 1 for the
// high frequencies, the factor for the low ones, 1 / ((1 - s) / factor + s) between, from the
// base frequencies in float32), at head dim 64 with Meta's parameters (factor 8, low 1, high
// 4, original context 8192): the config reads them back, and the model gives the logits of
// the same weights built from the Hugging Face config.
TEST(GgufModel, RopeFreqsReadAsLlama3Scaling) {
  ModelConfig cfg = tiny(false);
  cfg.hidden_size = 128;
  cfg.num_heads = 2;
  cfg.num_kv_heads = 2;  // head dim 64
  cfg.max_position_embeddings = 64;
  cfg.rope_scaling = {RopeScaling::Type::llama3, 8.0, 1.0, 4.0, 8192.0};
  const auto original = random_model(cfg);
  GgufSpec spec = as_llama_cpp(*original);
  std::vector<float> factors;
  for (int64_t i = 0; i < 32; ++i) {
    const double freq = double(1.0f / std::pow(500000.0f, float(2 * i) / 64.0f));
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < 8192.0 / 4.0) {
      factors.push_back(1.0f);
    } else if (wavelen > 8192.0 / 1.0) {
      factors.push_back(8.0f);
    } else {
      const double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
      factors.push_back(float(1.0 / ((1.0 - smooth) / 8.0 + smooth)));
    }
  }
  spec.tensors["rope_freqs.weight"] = Tensor::from_vector(factors, {32}, DType::f32);
  const std::string path = write_gguf("rope_freqs", spec);
  const ModelConfig read = config_from_gguf(io::GgufFile::open(path));
  EXPECT_EQ(read.rope_scaling.type, RopeScaling::Type::llama3);
  EXPECT_NEAR(read.rope_scaling.factor, 8.0, 1e-6);
  // lo is taken as 1: hi and the original context come back as published.
  EXPECT_NEAR(read.rope_scaling.high_freq_factor, 4.0, 1e-3);
  EXPECT_NEAR(read.rope_scaling.original_max_position, 8192.0, 2.0);
  const auto loaded = load_gguf_model(path, BuildOptions{});
  const auto logits_64 = [](const CausalLM& m) {  // every position of the context
    autograd::NoGradGuard no_grad;
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < 64; ++i) ids.push_back((i * 37 + 5) % 256);
    return m.forward(Tensor::from_vector(ids, {1, 64}, DType::i64)).to_vector<float>();
  };
  const std::vector<float> got = logits_64(*loaded), want = logits_64(*original);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
  // The same file read as unscaled would differ: the scaling is what makes them equal.
  ModelConfig plain = cfg;
  plain.rope_scaling = {};
  BuildOptions options;
  options.initialize = false;
  const auto unscaled = build_model(plain, options);
  std::map<std::string, Tensor> state;
  for (const auto& [name, p] : original->named_parameters()) state.emplace(name, p);
  unscaled->load(state, true);
  const std::vector<float> other = logits_64(*unscaled);
  double diff = 0;
  for (size_t i = 0; i < want.size(); ++i)
    diff = std::max(diff, double(std::fabs(other[i] - want[i])));
  EXPECT_GT(diff, 1e-4);  // ten times the bound above

  // A linear scaling from the metadata keys.
  GgufSpec linear = as_llama_cpp(*random_model(tiny(false)));
  linear.kvs["llama.rope.scaling.type"] = kv_str("linear");
  linear.kvs["llama.rope.scaling.factor"] = kv_f32(4.0f);
  EXPECT_EQ(config_from_gguf(io::GgufFile::open(write_gguf("linear", linear))).rope_scaling,
            (RopeScaling{RopeScaling::Type::linear, 4.0}));
}

// A Qwen2 file as llama.cpp's converter writes it: general.architecture qwen2, qwen2.* keys,
// q/k/v biases, and Q and K rows as Hugging Face holds them (the converter permutes them for
// its Llama architecture only). It reads as model_type qwen2 and gives the model's logits.
TEST(GgufModel, Qwen2FilesLoadWithTheirBiasesAndUnpermutedRows) {
  ModelConfig cfg = tiny(true);
  cfg.model_type = "qwen2";
  cfg.attention_qkv_bias = true;
  const auto original = random_model(cfg);
  GgufSpec llama = as_llama_cpp(*original);
  GgufSpec spec;
  for (const auto& [key, kv] : llama.kvs)
    spec.kvs[key.starts_with("llama.") ? "qwen2." + key.substr(6) : key] = kv;
  spec.kvs["general.architecture"] = kv_str("qwen2");
  for (const auto& [hf, w] : original->named_parameters())
    spec.tensors[*hf_to_llama_cpp_name(hf)] = w.contiguous();
  const std::string path = write_gguf("qwen2", spec);
  const ModelConfig read = config_from_gguf(io::GgufFile::open(path));
  EXPECT_EQ(read.model_type, "qwen2");
  EXPECT_TRUE(read.attention_qkv_bias);
  EXPECT_FALSE(read.attention_out_bias);
  EXPECT_EQ(logits_of(*load_gguf_model(path, BuildOptions{})), logits_of(*original));
}

struct BadSpec {
  std::string name;
  std::function<void(GgufSpec&)> edit;
  std::string message;  // after "[gguf <path>] "
};

TEST(GgufModel, EachFaultHasItsError) {
  const auto model = random_model(tiny(false));
  const std::vector<BadSpec> cases = {
      {"arch", [](GgufSpec& s) { s.kvs["general.architecture"] = kv_str("gpt2"); },
       "general.architecture is 'gpt2'; fitgrad reads the GGUF architectures llama, qwen2, "
       "qwen3, gemma2, gemma3 and phi3"},
      {"no_arch", [](GgufSpec& s) { s.kvs.erase("general.architecture"); },
       "metadata key 'general.architecture' is missing"},
      {"no_blocks", [](GgufSpec& s) { s.kvs.erase("llama.block_count"); },
       "metadata key 'llama.block_count' is missing"},
      {"no_eps", [](GgufSpec& s) { s.kvs.erase("llama.attention.layer_norm_rms_epsilon"); },
       "metadata key 'llama.attention.layer_norm_rms_epsilon' is missing"},
      {"no_embd", [](GgufSpec& s) { s.tensors.erase("token_embd.weight"); },
       "tensor 'token_embd.weight' is missing"},
      {"vocab", [](GgufSpec& s) { s.kvs["llama.vocab_size"] = kv_u32(255); },
       "llama.vocab_size = 255 but token_embd.weight has 256 rows"},
      {"heads", [](GgufSpec& s) { s.kvs["llama.attention.head_count"] = kv_u32(5); },
       "num_kv_heads = 2 must divide num_heads = 5"},
      {"rope_dims", [](GgufSpec& s) { s.kvs["llama.rope.dimension_count"] = kv_u32(8); },
       "llama.rope.dimension_count = 8 differs from head_dim = 16"},
      {"rope_scaling", [](GgufSpec& s) { s.kvs["llama.rope.scaling.type"] = kv_str("yarn"); },
       "llama.rope.scaling.type is 'yarn'; fitgrad implements none and linear"},
      {"linear_without_factor",
       [](GgufSpec& s) { s.kvs["llama.rope.scaling.type"] = kv_str("linear"); },
       "llama.rope.scaling.type is linear but llama.rope.scaling.factor is missing"},
      {"rope_freqs", [](GgufSpec& s) { s.tensors["rope_freqs.weight"] = Tensor::full({5}, 2.0); },
       "rope_freqs.weight has 5 values for 8 RoPE pairs"},
      {"rope_freqs_not_llama3",
       [](GgufSpec& s) {
         s.tensors["rope_freqs.weight"] =
             Tensor::from_vector(std::vector<float>{1, 1, 3, 1, 2, 8, 8, 8}, {8}, DType::f32);
       },
       "rope_freqs.weight: the factors between 1 and 8 are not Llama 3's"},
      {"experts", [](GgufSpec& s) { s.kvs["llama.expert_count"] = kv_u32(8); },
       "llama.expert_count = 8: mixture-of-experts models are not supported"},
      {"value_length",
       [](GgufSpec& s) {
         s.kvs["llama.attention.key_length"] = kv_u32(16);
         s.kvs["llama.attention.value_length"] = kv_u32(8);
       },
       "llama.attention.value_length = 8 differs from key_length = 16"},
  };
  for (const BadSpec& c : cases) {
    SCOPED_TRACE(c.name);
    GgufSpec spec = as_llama_cpp(*model);
    c.edit(spec);
    const std::string path = write_gguf("bad_" + c.name, spec);
    const io::GgufFile file = io::GgufFile::open(path);
    try {
      config_from_gguf(file);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("[gguf " + path + "] " + c.message), std::string::npos)
          << e.what();
    }
    EXPECT_THROW(load_gguf_model(file), Error);
  }
}

}  // namespace
}  // namespace fitgrad::nn
