// Every preset, built on the meta device (addresses, no bytes, no init compute), has the
// published parameter count and the published layer shapes under Hugging Face names; its
// parameters are labelled in the memory ledger by those names.
#include <gtest/gtest.h>

#include <map>

#include "autograd/variable.h"
#include "nn/decoder.h"
#include "tensor/memory/caching_allocator.h"

namespace fitgrad::nn {
namespace {

struct PublishedCount {
  const char* preset;
  int64_t params;
};

// The published totals (Hugging Face num_parameters() of each checkpoint).
constexpr PublishedCount kCounts[] = {
    {"gpt2", 124'439'808},
    {"gpt2-medium", 354'823'168},
    {"smollm2-135m", 134'515'008},
    {"llama2-7b", 6'738'415'616},
    {"llama3-8b", 8'030'261'248},
    {"mistral-7b", 7'241'732'096},
    {"llama2-13b", 13'015'864'320},
    {"llama-30b", 32'528'943'616},
    {"llama2-70b", 68'976'648'192},
    {"llama3.1-8b", 8'030'261'248},
    {"llama3.2-1b", 1'235'814'400},
    {"llama3.2-3b", 3'212'749'824},
    {"phi-3-mini", 3'821'079'552},
    {"gemma-2-9b", 9'241'705'984},
    // google/gemma-3-4b-pt's language model alone (the checkpoint adds a vision tower)
    {"gemma-3-4b", 3'880'263'168},
};

BuildOptions on_meta() {
  BuildOptions o;
  o.device = Device::meta();
  return o;
}

TEST(NnParams, PresetsHaveThePublishedParameterCountsOnMeta) {
  CachingAllocator& meta = allocator_for(Device::meta());
  for (const auto& [name, want] : kCounts) {
    const ModelConfig cfg = preset(name);
    const int64_t before = meta.by_category()[size_t(Category::parameter)].current;
    const auto model = build_model(cfg, on_meta());
    EXPECT_EQ(model->num_parameters(), want) << name;
    EXPECT_EQ(cfg.num_parameters(), want) << name;
    // Every parameter is on meta and in the ledger as a parameter.
    const int64_t after = meta.by_category()[size_t(Category::parameter)].current;
    EXPECT_GE(after - before, want * 4) << name;
    for (const auto& [n, t] : model->named_parameters()) {
      ASSERT_EQ(t.device(), Device::meta()) << n;
      ASSERT_EQ(t.dtype(), DType::f32) << n;
    }
  }
}

TEST(NnParams, TinyPresetsAreSmallAndBuildOnCpu) {
  for (const char* name : {"gpt2-tiny", "llama-tiny"}) {
    const ModelConfig cfg = preset(name);
    const auto model = build_model(cfg);
    EXPECT_EQ(model->num_parameters(), cfg.num_parameters()) << name;
    EXPECT_LT(model->num_parameters(), 200'000) << name;
    EXPECT_EQ(cfg.vocab_size, 256) << name;
  }
}

// Shapes of the layers of a Llama-family preset, by Hugging Face name.
void expect_llama_shapes(const CausalLM& m, const ModelConfig& c) {
  const auto p = m.state_dict();
  const int64_t C = c.hidden_size, F = c.intermediate_size, D = c.resolved_head_dim();
  const int64_t q = c.num_heads * D, kv = c.num_kv_heads * D;
  const std::string last = "model.layers." + std::to_string(c.num_layers - 1) + ".";
  std::map<std::string, Shape> want = {
      {"model.embed_tokens.weight", {c.vocab_size, C}},
      {"model.layers.0.input_layernorm.weight", {C}},
      {"model.layers.0.self_attn.o_proj.weight", {C, q}},
      {"model.layers.0.post_attention_layernorm.weight", {C}},
      {"model.layers.0.mlp.down_proj.weight", {C, F}},
      {last + "mlp.down_proj.weight", {C, F}},
      {"model.norm.weight", {C}},
  };
  if (c.fused_projections) {  // Phi-3's qkv_proj and gate_up_proj
    want["model.layers.0.self_attn.qkv_proj.weight"] = {q + 2 * kv, C};
    want["model.layers.0.mlp.gate_up_proj.weight"] = {2 * F, C};
  } else {
    want["model.layers.0.self_attn.q_proj.weight"] = {q, C};
    want["model.layers.0.self_attn.k_proj.weight"] = {kv, C};
    want["model.layers.0.self_attn.v_proj.weight"] = {kv, C};
    want["model.layers.0.mlp.gate_proj.weight"] = {F, C};
    want["model.layers.0.mlp.up_proj.weight"] = {F, C};
    want[last + "self_attn.k_proj.weight"] = {kv, C};
  }
  for (const auto& [name, shape] : want) {
    ASSERT_TRUE(p.count(name)) << c.name << " lacks " << name;
    EXPECT_EQ(p.at(name).shape(), shape) << c.name << " " << name;
  }
  EXPECT_FALSE(p.count("model.layers." + std::to_string(c.num_layers) + ".mlp.up_proj.weight"));
  EXPECT_FALSE(p.count("model.layers.0.self_attn.q_proj.bias")) << c.name;
  EXPECT_EQ(p.count("lm_head.weight"), c.tie_word_embeddings ? 0u : 1u) << c.name;
  if (!c.tie_word_embeddings) {
    EXPECT_EQ(p.at("lm_head.weight").shape(), (Shape{c.vocab_size, C}));
  }
  const size_t per_layer = c.fused_projections ? 6 : 9;
  EXPECT_EQ(p.size(), size_t(c.num_layers) * per_layer + 2 + (c.tie_word_embeddings ? 0 : 1))
      << c.name;
}

struct LlamaShape {
  const char* preset;
  int64_t hidden, intermediate, layers, heads, kv_heads, vocab;
  bool tied;
};

// From each model's published config.json.
constexpr LlamaShape kLlamaShapes[] = {
    {"smollm2-135m", 576, 1536, 30, 9, 3, 49152, true},
    {"llama2-7b", 4096, 11008, 32, 32, 32, 32000, false},
    {"llama3-8b", 4096, 14336, 32, 32, 8, 128256, false},
    {"llama3.1-8b", 4096, 14336, 32, 32, 8, 128256, false},
    {"llama3.2-1b", 2048, 8192, 16, 32, 8, 128256, true},
    {"llama3.2-3b", 3072, 8192, 28, 24, 8, 128256, true},
    {"mistral-7b", 4096, 14336, 32, 32, 8, 32000, false},
    {"phi-3-mini", 3072, 8192, 32, 32, 32, 32064, false},
    {"llama2-13b", 5120, 13824, 40, 40, 40, 32000, false},
    {"llama-30b", 6656, 17920, 60, 52, 52, 32000, false},
    {"llama2-70b", 8192, 28672, 80, 64, 8, 32000, false},
    {"llama-tiny", 64, 176, 2, 4, 2, 256, false},
};

TEST(NnParams, LlamaPresetLayerShapes) {
  for (const auto& s : kLlamaShapes) {
    const ModelConfig c = preset(s.preset);
    EXPECT_EQ(c.hidden_size, s.hidden) << s.preset;
    EXPECT_EQ(c.intermediate_size, s.intermediate) << s.preset;
    EXPECT_EQ(c.num_layers, s.layers) << s.preset;
    EXPECT_EQ(c.num_heads, s.heads) << s.preset;
    EXPECT_EQ(c.num_kv_heads, s.kv_heads) << s.preset;
    EXPECT_EQ(c.vocab_size, s.vocab) << s.preset;
    EXPECT_EQ(c.tie_word_embeddings, s.tied) << s.preset;
    EXPECT_EQ(c.family, Family::llama) << s.preset;
    const auto m = build_model(c, on_meta());
    expect_llama_shapes(*m, c);
  }
  EXPECT_DOUBLE_EQ(preset("llama3-8b").rope_theta, 500000.0);
  EXPECT_EQ(preset("llama3-8b").rope_scaling.type, RopeScaling::Type::none);
  // Llama 3.1 / 3.2's rope_scaling: factor 8 (3.1) or 32 (3.2), low 1, high 4, context 8192.
  EXPECT_EQ(preset("llama3.1-8b").rope_scaling,
            (RopeScaling{RopeScaling::Type::llama3, 8.0, 1.0, 4.0, 8192.0}));
  EXPECT_EQ(preset("llama3.2-1b").rope_scaling,
            (RopeScaling{RopeScaling::Type::llama3, 32.0, 1.0, 4.0, 8192.0}));
  EXPECT_EQ(preset("llama3.2-3b").max_position_embeddings, 131072);
  EXPECT_DOUBLE_EQ(preset("smollm2-135m").rope_theta, 100000.0);
  EXPECT_DOUBLE_EQ(preset("llama2-7b").rope_theta, 10000.0);
  EXPECT_EQ(preset("mistral-7b").sliding_window, 4096);
}

TEST(NnParams, Gpt2PresetLayerShapesAndOrder) {
  struct G {
    const char* preset;
    int64_t c, layers, heads;
  };
  for (const G& g :
       {G{"gpt2", 768, 12, 12}, G{"gpt2-medium", 1024, 24, 16}, G{"gpt2-tiny", 64, 2, 4}}) {
    const ModelConfig cfg = preset(g.preset);
    EXPECT_EQ(cfg.num_heads, g.heads);
    const auto m = build_model(cfg, on_meta());
    const auto named = m->named_parameters();
    const int64_t C = g.c, V = cfg.vocab_size;
    ASSERT_EQ(named.size(), size_t(2 + 12 * g.layers + 2)) << g.preset;
    // Hugging Face's order: wte, wpe, h.0 ... h.{L-1}, ln_f; no lm_head (tied).
    const std::vector<std::pair<std::string, Shape>> head = {
        {"transformer.wte.weight", {V, C}},
        {"transformer.wpe.weight", {cfg.max_position_embeddings, C}},
        {"transformer.h.0.ln_1.weight", {C}},
        {"transformer.h.0.ln_1.bias", {C}},
        {"transformer.h.0.attn.c_attn.weight", {C, 3 * C}},
        {"transformer.h.0.attn.c_attn.bias", {3 * C}},
        {"transformer.h.0.attn.c_proj.weight", {C, C}},
        {"transformer.h.0.attn.c_proj.bias", {C}},
        {"transformer.h.0.ln_2.weight", {C}},
        {"transformer.h.0.ln_2.bias", {C}},
        {"transformer.h.0.mlp.c_fc.weight", {C, 4 * C}},
        {"transformer.h.0.mlp.c_fc.bias", {4 * C}},
        {"transformer.h.0.mlp.c_proj.weight", {4 * C, C}},
        {"transformer.h.0.mlp.c_proj.bias", {C}},
        {"transformer.h.1.ln_1.weight", {C}},
    };
    for (size_t i = 0; i < head.size(); ++i) {
      EXPECT_EQ(named[i].first, head[i].first) << g.preset << " #" << i;
      EXPECT_EQ(named[i].second.shape(), head[i].second) << g.preset << " " << head[i].first;
    }
    EXPECT_EQ(named[named.size() - 2].first, "transformer.ln_f.weight");
    EXPECT_EQ(named.back().first, "transformer.ln_f.bias");
    EXPECT_EQ(named[named.size() - 3].first,
              "transformer.h." + std::to_string(g.layers - 1) + ".mlp.c_proj.bias");
  }
}

TEST(NnParams, LlamaOrderFollowsHuggingFace) {
  const auto m = build_model(preset("llama-tiny"), on_meta());
  const auto named = m->named_parameters();
  const std::vector<std::string> want = {
      "model.embed_tokens.weight",
      "model.layers.0.self_attn.q_proj.weight",
      "model.layers.0.self_attn.k_proj.weight",
      "model.layers.0.self_attn.v_proj.weight",
      "model.layers.0.self_attn.o_proj.weight",
      "model.layers.0.mlp.gate_proj.weight",
      "model.layers.0.mlp.up_proj.weight",
      "model.layers.0.mlp.down_proj.weight",
      "model.layers.0.input_layernorm.weight",
      "model.layers.0.post_attention_layernorm.weight",
  };
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(named[i].first, want[i]);
  EXPECT_EQ(named[named.size() - 2].first, "model.norm.weight");
  EXPECT_EQ(named.back().first, "lm_head.weight");
}

TEST(NnParams, Qwen2AndBiasFlagsAddBiases) {
  ModelConfig c = preset("llama-tiny");
  c.model_type = "qwen2";
  c.attention_qkv_bias = true;
  const auto m = build_model(c, on_meta());
  const auto p = m->state_dict();
  EXPECT_EQ(p.at("model.layers.0.self_attn.q_proj.bias").shape(), (Shape{64}));
  EXPECT_EQ(p.at("model.layers.0.self_attn.k_proj.bias").shape(), (Shape{32}));
  EXPECT_EQ(p.at("model.layers.1.self_attn.v_proj.bias").shape(), (Shape{32}));
  EXPECT_FALSE(p.count("model.layers.0.self_attn.o_proj.bias"));
  EXPECT_EQ(m->num_parameters(), c.num_parameters());
  c.attention_out_bias = c.mlp_bias = true;
  const auto all = build_model(c, on_meta());
  EXPECT_TRUE(all->state_dict().count("model.layers.0.self_attn.o_proj.bias"));
  EXPECT_TRUE(all->state_dict().count("model.layers.0.mlp.down_proj.bias"));
  EXPECT_EQ(all->num_parameters(), c.num_parameters());
}

TEST(NnParams, ParametersAreNamedLeavesLabelledInTheLedger) {
  CachingAllocator& meta = allocator_for(Device::meta());
  const auto m = build_model(preset("gpt2-tiny"), on_meta());
  std::map<std::string, int64_t> by_label;
  for (const auto& [id, bytes] : meta.by_label()) by_label[label_text(id)] = bytes;
  for (const auto& [name, t] : m->named_parameters()) {
    EXPECT_TRUE(autograd::requires_grad(t)) << name;
    EXPECT_TRUE(autograd::is_leaf(t)) << name;
    EXPECT_EQ(autograd::meta_of(t)->name, name);
    ASSERT_TRUE(by_label.count(name)) << name << " is not a ledger label";
    EXPECT_GE(by_label.at(name), int64_t(t.nbytes())) << name;
  }
}

}  // namespace
}  // namespace fitgrad::nn
