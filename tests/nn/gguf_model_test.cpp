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

struct BadSpec {
  std::string name;
  std::function<void(GgufSpec&)> edit;
  std::string message;  // after "[gguf <path>] "
};

TEST(GgufModel, EachFaultHasItsError) {
  const auto model = random_model(tiny(false));
  const std::vector<BadSpec> cases = {
      {"arch", [](GgufSpec& s) { s.kvs["general.architecture"] = kv_str("gpt2"); },
       "general.architecture is 'gpt2'; fitgrad reads llama-architecture GGUF models only"},
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
      {"rope_scaling", [](GgufSpec& s) { s.kvs["llama.rope.scaling.type"] = kv_str("linear"); },
       "llama.rope.scaling.type is 'linear'; RoPE scaling is not supported"},
      {"rope_freqs", [](GgufSpec& s) { s.tensors["rope_freqs.weight"] = Tensor::full({8}, 1.0); },
       "tensor 'rope_freqs.weight' (Llama 3.1 RoPE scaling) is not supported"},
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
