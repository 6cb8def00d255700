// PyTorch golden data for a whole model (issue 3): a 2-layer pre-norm GPT-2-style decoder
// built from fitgrad::autograd functions runs forward and backward on the parameters and
// ids in block.gtb, and its logits, loss and EVERY parameter gradient must match torch's
// (torch.autograd in float64, stored as f32). See gen_golden.py for the reference model.
//
// Tolerances: Note [Golden block tolerances] in golden_compare.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

// x @ W + b with GPT-2's Conv1D layout: W (in, out), b (out).
Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b) {
  return ag::add(ag::matmul(x, w), b);
}

struct Gpt2Config {
  int64_t vocab, n_embd, n_layer, n_head;
  double eps;
};

// The forward pass of gen_golden.py's block_forward. Returns {logits (B, T, V), loss ()}.
std::pair<Tensor, Tensor> gpt2_forward(const std::map<std::string, Tensor>& p,
                                       const Gpt2Config& cfg, const Tensor& idx,
                                       const Tensor& targets) {
  const int64_t b = idx.size(0), t = idx.size(1), c = cfg.n_embd, nh = cfg.n_head, hd = c / nh;
  auto P = [&](const std::string& name) { return p.at(name); };
  Tensor x = ag::add(ag::embedding(P("transformer.wte.weight"), idx),
                     ag::narrow(P("transformer.wpe.weight"), 0, 0, t));  // (B, T, C)
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    const std::string h = "transformer.h." + std::to_string(i) + ".";
    const Tensor a = ag::layer_norm(x, P(h + "ln_1.weight"), P(h + "ln_1.bias"), cfg.eps);
    const Tensor qkv = conv1d(a, P(h + "attn.c_attn.weight"), P(h + "attn.c_attn.bias"));
    // (B, T, 3C) -> three (B, NH, T, hd)
    auto head = [&](int64_t j) {
      const Tensor z = ag::reshape(ag::narrow(qkv, 2, j * c, c), {b, t, nh, hd});
      return ag::contiguous(ag::transpose(z, 1, 2));
    };
    const Tensor y = ag::attention(head(0), head(1), head(2), /*causal=*/true);
    const Tensor merged = ag::reshape(ag::contiguous(ag::transpose(y, 1, 2)), {b, t, c});
    x = ag::add(x, conv1d(merged, P(h + "attn.c_proj.weight"), P(h + "attn.c_proj.bias")));
    const Tensor m = ag::layer_norm(x, P(h + "ln_2.weight"), P(h + "ln_2.bias"), cfg.eps);
    const Tensor f = ag::gelu(conv1d(m, P(h + "mlp.c_fc.weight"), P(h + "mlp.c_fc.bias")));
    x = ag::add(x, conv1d(f, P(h + "mlp.c_proj.weight"), P(h + "mlp.c_proj.bias")));
  }
  x = ag::layer_norm(x, P("transformer.ln_f.weight"), P("transformer.ln_f.bias"), cfg.eps);
  const Tensor logits = ag::matmul(x, P("transformer.wte.weight"), false, true);  // (B, T, V)
  const Tensor loss =
      ag::cross_entropy(ag::reshape(logits, {b * t, cfg.vocab}), targets.reshape({b * t}));
  return {logits, loss};
}

TEST(GoldenBlock, Gpt2TwoLayerLossAndEveryGradientMatchTorch) {
  const GoldenFile file(golden_path("block.gtb"));
  const auto& meta = file.meta();
  const Gpt2Config cfg{meta.at("vocab"), meta.at("n_embd"), meta.at("n_layer"), meta.at("n_head"),
                       meta.at("layer_norm_eps")};
  ASSERT_EQ(meta.at("gelu"), "tanh");

  std::map<std::string, Tensor> params;
  for (const std::string name : meta.at("param_names")) {
    Tensor t = file.tensor(name);
    ag::set_requires_grad(t);
    ag::set_name(t, name);
    params.emplace(name, t);
  }
  // Every parameter of the reference model, and nothing else, has a stored gradient.
  for (const auto& name : file.names())
    if (name.size() > 5 && name.ends_with(".grad")) {
      EXPECT_TRUE(params.count(name.substr(0, name.size() - 5))) << name;
    }
  EXPECT_EQ(params.size(), size_t(2 + cfg.n_layer * 12 + 2));

  const auto [logits, loss] = gpt2_forward(params, cfg, file.tensor("idx"), file.tensor("targets"));
  ag::backward(loss);

  auto check = [&](const std::string& what, const Tensor& got, const std::string& stored) {
    expect_matches_golden(file, what, got, stored);
  };
  check("loss", loss, "loss");
  check("logits", logits, "logits");
  for (const auto& [name, t] : params) check(name + ".grad", ag::grad(t), name + ".grad");
}

// The same golden model built from fitgrad::nn's GPT-2 modules: the golden parameters load
// by their Hugging Face names (strict), and the model's logits, loss and every parameter
// gradient match torch's within Note [Golden block tolerances].
TEST(GoldenBlock, Gpt2ModulesLoadTheGoldenParametersAndMatchTorch) {
  const GoldenFile file(golden_path("block.gtb"));
  const auto& meta = file.meta();
  nn::ModelConfig cfg = nn::preset("gpt2-tiny");
  cfg.name = "golden-block";
  cfg.vocab_size = meta.at("vocab");
  cfg.hidden_size = meta.at("n_embd");
  cfg.intermediate_size = 4 * cfg.hidden_size;
  cfg.num_layers = meta.at("n_layer");
  cfg.num_heads = cfg.num_kv_heads = meta.at("n_head");
  cfg.max_position_embeddings = meta.at("n_positions");
  cfg.norm_eps = meta.at("layer_norm_eps");
  nn::BuildOptions options;
  options.initialize = false;
  const auto model = nn::build_model(cfg, options);

  std::map<std::string, Tensor> state;
  for (const std::string name : meta.at("param_names")) state.emplace(name, file.tensor(name));
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
  for (const auto& [name, t] : model->named_parameters())
    check(name + ".grad", ag::grad(t), name + ".grad");
}

}  // namespace
}  // namespace fitgrad::testing
