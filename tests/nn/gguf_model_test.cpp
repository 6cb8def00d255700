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

namespace fitgrad::nn {
namespace {

// ---- a minimal GGUF v3 writer: string, u32 and f32 metadata, F32 tensors ----

struct Kv {
  uint32_t type;               // 4 u32, 6 f32, 8 string
  std::vector<uint8_t> value;  // encoded
};

template <class T>
void put(std::vector<uint8_t>& b, T v) {
  uint8_t raw[sizeof(T)];
  std::memcpy(raw, &v, sizeof(T));
  b.insert(b.end(), raw, raw + sizeof(T));
}
void put_str(std::vector<uint8_t>& b, const std::string& s) {
  put<uint64_t>(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}
Kv kv_u32(uint32_t v) {
  Kv k{4, {}};
  put(k.value, v);
  return k;
}
Kv kv_f32(float v) {
  Kv k{6, {}};
  put(k.value, v);
  return k;
}
Kv kv_str(const std::string& v) {
  Kv k{8, {}};
  put_str(k.value, v);
  return k;
}

struct GgufSpec {
  std::map<std::string, Kv> kvs;
  std::map<std::string, Tensor> tensors;  // llama.cpp name -> f32 tensor (row-major)
};

std::string write_gguf(const std::string& name, const GgufSpec& spec) {
  constexpr uint64_t kAlign = 32;
  std::vector<uint8_t> b;
  put<uint32_t>(b, 0x46554747);  // "GGUF"
  put<uint32_t>(b, 3);
  put<uint64_t>(b, spec.tensors.size());
  put<uint64_t>(b, spec.kvs.size());
  for (const auto& [key, kv] : spec.kvs) {
    put_str(b, key);
    put<uint32_t>(b, kv.type);
    b.insert(b.end(), kv.value.begin(), kv.value.end());
  }
  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (const auto& [tname, t] : spec.tensors) {
    put_str(b, tname);
    put<uint32_t>(b, uint32_t(t.dim()));
    for (int64_t d = t.dim() - 1; d >= 0; --d) put<uint64_t>(b, uint64_t(t.size(d)));  // ne
    put<uint32_t>(b, 0);                                                               // F32
    put<uint64_t>(b, offset);
    offsets.push_back(offset);
    offset = (offset + uint64_t(t.numel()) * 4 + kAlign - 1) / kAlign * kAlign;
  }
  const size_t data_start = (b.size() + kAlign - 1) / kAlign * kAlign;
  b.resize(data_start + offset, 0);
  size_t i = 0;
  for (const auto& [tname, t] : spec.tensors) {
    const std::vector<float> v = t.to_vector<float>();
    std::memcpy(b.data() + data_start + offsets[i++], v.data(), v.size() * 4);
  }
  const std::string path = ::testing::TempDir() + "fitgrad_gguf_model_" + name + ".gguf";
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  return path;
}

// The parameters of `model` as llama.cpp's converter stores them: llama.* metadata, blk.N.*
// names, q/k rows permuted for interleaved RoPE, F32 data.
GgufSpec as_llama_cpp(const CausalLM& model) {
  const ModelConfig& cfg = model.config();
  GgufSpec s;
  s.kvs["general.architecture"] = kv_str("llama");
  s.kvs["general.name"] = kv_str("tiny");
  s.kvs["llama.context_length"] = kv_u32(uint32_t(cfg.max_position_embeddings));
  s.kvs["llama.embedding_length"] = kv_u32(uint32_t(cfg.hidden_size));
  s.kvs["llama.feed_forward_length"] = kv_u32(uint32_t(cfg.intermediate_size));
  s.kvs["llama.block_count"] = kv_u32(uint32_t(cfg.num_layers));
  s.kvs["llama.attention.head_count"] = kv_u32(uint32_t(cfg.num_heads));
  s.kvs["llama.attention.head_count_kv"] = kv_u32(uint32_t(cfg.num_kv_heads));
  s.kvs["llama.attention.layer_norm_rms_epsilon"] = kv_f32(float(cfg.norm_eps));
  s.kvs["llama.rope.freq_base"] = kv_f32(float(cfg.rope_theta));
  s.kvs["llama.rope.dimension_count"] = kv_u32(uint32_t(cfg.resolved_head_dim()));
  for (const auto& [hf, w] : model.named_parameters()) {
    Tensor t = w;
    if (hf.find(".q_proj.") != std::string::npos) t = permute_qk(w, cfg.num_heads);
    if (hf.find(".k_proj.") != std::string::npos) t = permute_qk(w, cfg.num_kv_heads);
    s.tensors[*hf_to_llama_cpp_name(hf)] = t.contiguous();
  }
  return s;
}

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
