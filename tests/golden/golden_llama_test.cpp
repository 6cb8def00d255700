// PyTorch golden data for a whole Llama-style model (issue 4): a 2-layer decoder with
// RMSNorm, RoPE (Hugging Face's rotate_half convention, theta 10000), grouped-query
// attention (4 query heads, 2 kv heads), a SwiGLU MLP and an untied lm_head, built from
// fitgrad::nn's Llama modules. The golden parameters in llama_block.gtb load by their
// Hugging Face names (strict); the model's logits, loss and EVERY parameter gradient must
// match torch's (torch.autograd in float64, stored as f32). See gen_golden.py's
// llama_forward for the reference model, written there in plain torch ops.
//
// Tolerances: those of Note [Golden block tolerances] in golden_compare.h; torch's
// own float32 run of this model lands up to ~1.5e-6 normwise from its float64 result
// (meta "torch_f32_err").
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "nn/decoder.h"
#include "tests/golden/golden_compare.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::testing {
namespace {

namespace ag = fitgrad::autograd;

// The ModelConfig of the golden model, from the file's meta.
nn::ModelConfig golden_llama_config(const nlohmann::json& meta) {
  nn::ModelConfig cfg = nn::preset("llama-tiny");
  cfg.name = "golden-llama";
  cfg.vocab_size = meta.at("vocab");
  cfg.hidden_size = meta.at("hidden");
  cfg.intermediate_size = meta.at("intermediate");
  cfg.num_layers = meta.at("n_layer");
  cfg.num_heads = meta.at("n_head");
  cfg.num_kv_heads = meta.at("n_kv_head");
  cfg.head_dim = 0;  // hidden / heads
  cfg.max_position_embeddings = meta.at("seq_len");
  cfg.norm_eps = meta.at("rms_norm_eps");
  cfg.rope_theta = meta.at("rope_theta");
  cfg.tie_word_embeddings = meta.at("tie_word_embeddings");
  cfg.attention_qkv_bias = cfg.attention_out_bias = cfg.mlp_bias = false;
  cfg.sliding_window = 0;
  return cfg;
}

TEST(GoldenLlama, TwoLayerModulesLoadTheGoldenParametersAndMatchTorch) {
  const GoldenFile file(golden_path("llama_block.gtb"));
  const auto& meta = file.meta();
  ASSERT_EQ(meta.at("linear_weight_layout"), "(out, in)");
  const nn::ModelConfig cfg = golden_llama_config(meta);
  ASSERT_EQ(cfg.family, nn::Family::llama);
  nn::BuildOptions options;
  options.initialize = false;
  const auto model = nn::build_model(cfg, options);

  std::map<std::string, Tensor> state;
  for (const std::string name : meta.at("param_names")) state.emplace(name, file.tensor(name));
  // Every parameter of the reference model, and nothing else, has a stored gradient.
  for (const auto& name : file.names())
    if (name.size() > 5 && name.ends_with(".grad")) {
      EXPECT_TRUE(state.count(name.substr(0, name.size() - 5))) << name;
    }
  // embed_tokens, per layer 2 norms + q/k/v/o + gate/up/down, norm, lm_head.
  EXPECT_EQ(state.size(), size_t(1 + cfg.num_layers * 9 + 2));
  model->load(state, /*strict=*/true);  // every name matches, both ways
  EXPECT_EQ(model->named_parameters().size(), state.size());

  const Tensor idx = file.tensor("idx"), targets = file.tensor("targets");
  Tensor logits;
  {
    ag::NoGradGuard no_grad;
    logits = model->forward(idx);
  }
  const Tensor loss = model->loss(idx, targets);
  ag::backward(loss);

  auto check = [&](const std::string& what, const Tensor& got, const std::string& stored) {
    expect_matches_golden(file, what, got, stored);
  };
  check("loss", loss, "loss");
  check("logits", logits, "logits");
  size_t checked = 0;
  for (const auto& [name, t] : model->named_parameters()) {
    check(name + ".grad", ag::grad(t), name + ".grad");
    ++checked;
  }
  EXPECT_EQ(checked, state.size());
}

}  // namespace
}  // namespace fitgrad::testing
