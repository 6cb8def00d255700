// The Linear factory (Note [Linear factory] in nn/layers.h): gpt2-tiny built with a factory
// that gives its attention projections a LoRA-shaped layer (a frozen dense base plus two
// small trainable factors, B starting at zero as PEFT's) and every other Linear the dense
// one. The model's output at build equals the plain model's (B = 0); with everything but the
// factors frozen it trains, and the optimizer holds state only for the factors. A factory
// whose layer has the wrong sizes is an error naming the path.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "nn/config.h"
#include "nn/decoder.h"
#include "nn/layers.h"
#include "optim/adamw.h"
#include "tests/nn/lora_shaped.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::nn {
namespace {

namespace ag = fitgrad::autograd;
using testing::to_f64;

LinearFactory lora_on(const std::string& target, int64_t r) {
  return [target, r](const LinearSpec& spec, BuildContext& ctx) -> std::unique_ptr<LinearLayer> {
    if (spec.name == target) return std::make_unique<test_layers::LoraShaped>(spec, r, ctx);
    return std::make_unique<Linear>(spec.path, spec.name, spec.in, spec.out, spec.options, ctx);
  };
}

std::pair<Tensor, Tensor> batch(int64_t vocab) {
  std::mt19937_64 rng(6);
  std::vector<int64_t> ids(2 * 17);
  for (int64_t& id : ids) id = int64_t(rng() % uint64_t(vocab));
  const Tensor all = Tensor::from_vector(ids, {2, 17}, DType::i64);
  return {all.narrow(1, 0, 16).contiguous(), all.narrow(1, 1, 16).contiguous()};
}

TEST(LinearFactory, ALoraShapedModelTrainsOnlyItsFactors) {
  const ModelConfig cfg = preset("gpt2-tiny");
  const auto plain = build_model(cfg, {.seed = 3});
  const auto lora = build_model(cfg, {.seed = 3, .linear_factory = lora_on("c_attn", 4)});
  const auto names = lora->named_parameters();
  int64_t factors = 0;
  for (const auto& [name, t] : names)
    if (name.find(".lora_") != std::string::npos) ++factors;
  EXPECT_EQ(factors, 2 * cfg.num_layers);
  EXPECT_EQ(lora->parameter("transformer.h.0.attn.c_attn.lora_A").shape(),
            (Shape{4, cfg.hidden_size}));
  EXPECT_EQ(lora->parameter("transformer.h.0.attn.c_attn.base_layer.weight").shape(),
            (Shape{cfg.hidden_size, 3 * cfg.hidden_size}));
  const auto [x, y] = batch(cfg.vocab_size);
  {
    ag::NoGradGuard no_grad;
    // B = 0: the LoRA model starts as the dense one. The init draws differ (the factors
    // draw too), so compare the LoRA model against itself with its bases copied in.
    std::map<std::string, Tensor> state;
    for (const auto& [name, t] : lora->named_parameters()) {
      std::string dense = name;
      const size_t at = dense.find(".base_layer");
      if (at != std::string::npos) dense.erase(at, std::string(".base_layer").size());
      if (name.find(".lora_") == std::string::npos) state[dense] = t;
    }
    plain->load(state);
    EXPECT_EQ(to_f64(lora->forward(x)), to_f64(plain->forward(x)));
  }
  lora->freeze("*");
  lora->unfreeze("*.lora_*");
  const std::vector<double> base_before =
      to_f64(lora->parameter("transformer.h.1.attn.c_attn.base_layer.weight"));
  optim::AdamW opt(optim::decay_groups(lora->trainable_parameters(), 0.0),
                   optim::AdamWOptions{1e-2, 0.9, 0.999, 1e-8, 0.0});
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    const Tensor loss = lora->loss(x, y);
    (step == 0 ? first : last) = loss.item();
    ag::backward(loss);
    opt.step();
    opt.zero_grad();
  }
  EXPECT_LT(last, 0.95 * first) << "first " << first << ", last " << last;
  EXPECT_EQ(to_f64(lora->parameter("transformer.h.1.attn.c_attn.base_layer.weight")), base_before);
  for (const auto& [key, state] : opt.state_dict()) {
    if (key != "step") {
      EXPECT_NE(key.find(".lora_"), std::string::npos) << key;
    }
  }
}

TEST(LinearFactory, ALayerOfTheWrongSizeIsAnError) {
  const LinearFactory wrong = [](const LinearSpec& spec, BuildContext& ctx) {
    return std::make_unique<Linear>(spec.path, spec.name, spec.in, spec.out + 1, spec.options, ctx);
  };
  EXPECT_THAT(testing::error_of(
                  [&] { build_model(preset("gpt2-tiny"), {.seed = 3, .linear_factory = wrong}); }),
              ::testing::HasSubstr("the linear factory made"));
}

}  // namespace
}  // namespace fitgrad::nn
