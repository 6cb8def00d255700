// LoRA layers with PEFT's semantics (nn/lora.h): PEFT's initialisation (B zeros, A within
// Kaiming-uniform's bound 1/sqrt(in)) leaves a model's logits unchanged; only the factors
// train (the base gets no gradient); the factors' gradients match central finite
// differences; scaling is alpha / r, alpha / sqrt(r) with rsLoRA; merged and unmerged
// outputs agree and unmerge restores the weight; merging into an NF4 base requantizes and
// reports its error; PEFT's module names.
#include "nn/lora.h"

#include <gtest/gtest.h>

#include <cmath>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "nn/config.h"
#include "nn/decoder.h"
#include "nn/nf4_linear.h"
#include "nn/target_modules.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::nn {
namespace {

using testing::to_f64;

std::unique_ptr<LoraLinear> make_layer(int64_t in, int64_t out, const LoraConfig& c,
                                       uint64_t seed = 1) {
  BuildOptions o;
  o.seed = seed;
  BuildContext ctx(o);
  LinearSpec spec{"m.proj", "proj", in, out, {}};
  return std::make_unique<LoraLinear>(spec, c, ctx);
}

TEST(Lora, PeftInitialisationAndNames) {
  LoraConfig c;
  c.r = 4;
  c.alpha = 16;
  const auto layer = make_layer(64, 48, c);
  const auto a = to_f64(layer->lora_A()), b = to_f64(layer->lora_B());
  EXPECT_EQ(layer->lora_A().shape(), (Shape{4, 64}));
  EXPECT_EQ(layer->lora_B().shape(), (Shape{48, 4}));
  double largest = 0;
  for (double x : a) largest = std::max(largest, std::fabs(x));
  EXPECT_LE(largest, 1.0 / 8.0);  // 1 / sqrt(64)
  EXPECT_GT(largest, 0.1);        // and spread over it
  for (double x : b) EXPECT_EQ(x, 0.0);
  std::vector<std::string> names;
  for (const auto& [name, t] : layer->named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"m.proj.base_layer.weight", "m.proj.base_layer.bias",
                                             "m.proj.lora_A.weight", "m.proj.lora_B.weight"}));
  EXPECT_EQ(c.scaling(), 4.0);
  c.use_rslora = true;
  EXPECT_EQ(c.scaling(), 8.0);
}

TEST(Lora, AFreshAdapterLeavesTheLogitsAndOnlyTheFactorsTrain) {
  const ModelConfig cfg = preset("llama-tiny");
  const auto plain = build_model(cfg, {.seed = 4});
  auto targets = std::make_shared<TargetModules>(TargetModules::all_linear());
  LoraConfig c;
  c.r = 4;
  c.alpha = 8;
  BuildOptions o{.seed = 4};
  o.linear_factory = targeted_factory(targets, lora_factory(c));
  const auto lora = build_model(cfg, o);
  // The base weights are the plain model's: load them by PEFT's base_layer names.
  std::map<std::string, Tensor> state;
  for (const auto& [name, t] : plain->named_parameters()) {
    std::string key = name;
    const auto dot = key.rfind('.');
    if (lora->state_dict().count(key) == 0)
      key = key.substr(0, dot) + ".base_layer" + key.substr(dot);
    state[key] = t;
  }
  for (const auto& [name, t] : lora->named_parameters())
    if (name.find(".lora_") != std::string::npos) state[name] = t.clone();
  lora->load(state);
  const int64_t factors_trainable = mark_only_lora_as_trainable(*lora);
  std::vector<int64_t> v(2 * 9);
  for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t((i * 31 + 5) % 256);
  const Tensor all = Tensor::from_vector(v, {2, 9}, DType::i64);
  const Tensor ids = all.narrow(1, 0, 8).contiguous(),
               targets_ids = all.narrow(1, 1, 8).contiguous();
  {
    autograd::NoGradGuard no_grad;
    EXPECT_EQ(to_f64(lora->forward(ids)), to_f64(plain->forward(ids)));
  }
  autograd::backward(lora->loss(ids, targets_ids));
  int64_t factors = 0;
  for (const auto& [name, t] : lora->named_parameters()) {
    const bool factor = name.find(".lora_") != std::string::npos;
    EXPECT_EQ(autograd::grad(t).defined(), factor) << name;
    if (factor) factors += t.numel();
  }
  EXPECT_GT(factors, 0);
  int64_t trainable = 0;
  for (const auto& [name, t] : lora->trainable_parameters()) trainable += t.numel();
  EXPECT_EQ(trainable, factors);
  EXPECT_EQ(factors_trainable, factors);
}

TEST(Lora, FactorGradientsMatchFiniteDifferences) {
  LoraConfig c;
  c.r = 3;
  c.alpha = 6;
  const auto layer = make_layer(7, 5, c, 2);
  // B = 0 would make dA zero: give both factors values.
  Tensor b = layer->lora_B();
  {
    autograd::NoGradGuard no_grad;
    b.copy_(testing::random_tensor({5, 3}, 9, DType::f32, -0.5, 0.5));
  }
  const Tensor x = testing::random_tensor({4, 7}, 10);
  const Tensor r = testing::random_tensor({4, 5}, 11);
  auto loss = [&] { return autograd::sum(autograd::mul(layer->forward(x), r)); };
  autograd::backward(loss());
  for (const Tensor& p : {layer->lora_A(), layer->lora_B()}) {
    const auto analytic = to_f64(autograd::grad(p));
    Tensor q = p;
    for (int64_t i = 0; i < p.numel(); ++i) {
      autograd::NoGradGuard no_grad;
      float* w = q.data<float>() + i;
      const float keep = *w;
      const float h = 1e-2f;
      *w = keep + h;
      const double up = loss().item();
      *w = keep - h;
      const double down = loss().item();
      *w = keep;
      EXPECT_NEAR(analytic[size_t(i)], (up - down) / (2 * double(h)), 2e-3) << i;
    }
  }
}

TEST(Lora, MergedAndUnmergedOutputsAgree) {
  LoraConfig c;
  c.r = 4;
  c.alpha = 32;
  c.use_rslora = true;
  const auto layer = make_layer(32, 24, c, 3);
  Tensor b = layer->lora_B();
  {
    autograd::NoGradGuard no_grad;
    b.copy_(testing::random_tensor({24, 4}, 12, DType::f32, -0.1, 0.1));
  }
  const Tensor x = testing::random_tensor({5, 32}, 13);
  autograd::NoGradGuard no_grad;
  const auto before = to_f64(layer->forward(x));
  const auto weight = to_f64(layer->named_parameters()[0].second);
  EXPECT_LE(layer->merge(), 1e-6);  // f32 rounding of the merged weight only
  EXPECT_TRUE(layer->merged());
  const auto merged = to_f64(layer->forward(x));
  EXPECT_TRUE(testing::all_close(merged, before, 1e-5, 1e-5));
  layer->unmerge();
  EXPECT_TRUE(testing::all_close(to_f64(layer->named_parameters()[0].second), weight, 0, 1e-6));
  EXPECT_TRUE(testing::all_close(to_f64(layer->forward(x)), before, 1e-6, 1e-6));
  testing::expect_error([&] { layer->unmerge(); }, "[lora]", "is not merged");
}

TEST(Lora, MergingIntoAnNf4BaseRequantizesAndReportsItsError) {
  LoraConfig c;
  c.r = 4;
  c.alpha = 8;
  BuildOptions o;
  o.seed = 6;
  BuildContext ctx(o);
  LoraLinear layer(LinearSpec{"m.proj", "proj", 128, 64, {}}, c, ctx, nf4_factory({}));
  Tensor b = layer.lora_B();
  {
    autograd::NoGradGuard no_grad;
    b.copy_(testing::random_tensor({64, 4}, 14, DType::f32, -0.05, 0.05));
  }
  const Tensor x = testing::random_tensor({6, 128}, 15);
  autograd::NoGradGuard no_grad;
  const auto unmerged = to_f64(layer.forward(x));
  const double err = layer.merge();
  // The requantization moves weights by under half NF4's widest gap (0.28) times the
  // block's absmax (weights ~ normal(0, 0.02): absmax well under 0.1).
  EXPECT_GT(err, 0.0);
  EXPECT_LT(err, 0.14 * 0.1);
  const auto merged = to_f64(layer.forward(x));
  double diff = 0, norm = 0;
  for (size_t i = 0; i < merged.size(); ++i) {
    diff += (merged[i] - unmerged[i]) * (merged[i] - unmerged[i]);
    norm += unmerged[i] * unmerged[i];
  }
  EXPECT_LT(std::sqrt(diff / norm), 0.2);
}

TEST(Lora, BadSettingsAreErrorsNamingTheLayer) {
  LoraConfig c;
  c.r = 0;
  testing::expect_error([&] { make_layer(4, 4, c); }, "[lora]", "m.proj: r must be >= 1, got 0");
  c.r = 2;
  c.dropout = 1.0;
  testing::expect_error([&] { make_layer(4, 4, c); }, "[lora]", "lora_dropout must be in [0, 1)");
}

}  // namespace
}  // namespace fitgrad::nn
