// Freezing by name (Note [Freezing by name] in nn/module.h): gpt2-tiny with its attention
// frozen trains only the rest. Frozen parameters get no gradient, stay bitwise unchanged
// through an AdamW step and hold no optimizer state, the backward runs fewer GEMMs, and
// unfreeze restores training. A LoRA-shaped product (a frozen dense base plus two small
// trainable factors) learns a target the base alone misses. A pattern matching nothing is an
// error naming it. Buffers (Note [Buffers]) live under their own ledger category and stay
// out of training.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "nn/config.h"
#include "nn/decoder.h"
#include "optim/adamw.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/matmul.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::nn {
namespace {

namespace ag = fitgrad::autograd;
using testing::random_tensor;
using testing::to_f64;

Tensor batch_ids(int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> ids(2 * 17);
  for (int64_t& id : ids) id = int64_t(rng() % uint64_t(vocab));
  return Tensor::from_vector(ids, {2, 17}, DType::i64);
}

// One forward/backward of `model` on a fixed batch; returns the matmul and linear backward
// GEMMs it dispatched.
uint64_t backward_gemms(CausalLM& model, int64_t vocab) {
  const Tensor all = batch_ids(vocab, 3);
  const Tensor x = all.narrow(1, 0, 16).contiguous(), y = all.narrow(1, 1, 16).contiguous();
  const Tensor loss = model.loss(x, y);
  const uint64_t before = backend::dispatch_count(backend::OpId::matmul);
  ag::backward(loss);
  return backend::dispatch_count(backend::OpId::matmul) - before;
}

TEST(Freeze, FrozenParametersGetNoGradientNoStateAndDoNotMove) {
  const ModelConfig cfg = preset("gpt2-tiny");
  const auto model = build_model(cfg, {.seed = 5});
  const uint64_t all_gemms = backward_gemms(*model, cfg.vocab_size);
  model->zero_grad();
  const int64_t frozen = model->freeze("*.attn.*");
  EXPECT_EQ(frozen, 4 * cfg.num_layers);  // c_attn and c_proj, weight and bias, per layer
  std::set<std::string> frozen_names;
  std::map<std::string, std::vector<double>> before;
  for (const auto& [name, t] : model->named_parameters())
    if (!ag::requires_grad(t)) {
      frozen_names.insert(name);
      before[name] = to_f64(t);
    }
  EXPECT_EQ(int64_t(frozen_names.size()), frozen);
  EXPECT_EQ(model->trainable_parameters().size(),
            model->named_parameters().size() - frozen_names.size());
  const uint64_t frozen_gemms = backward_gemms(*model, cfg.vocab_size);
  EXPECT_EQ(frozen_gemms + uint64_t(cfg.num_layers) * 2, all_gemms)
      << "no dW GEMM for the two frozen projections of each layer";
  optim::AdamW opt({{model->named_parameters(), 0.1}}, {});
  opt.step();
  for (const auto& [name, t] : model->named_parameters()) {
    if (frozen_names.count(name)) {
      EXPECT_FALSE(ag::grad(t).defined()) << name;
      EXPECT_EQ(to_f64(t), before[name]) << name;
    } else {
      EXPECT_TRUE(ag::grad(t).defined()) << name;
    }
  }
  for (const auto& [key, state] : opt.state_dict())
    for (const std::string& name : frozen_names)
      EXPECT_NE(key.rfind(name + ".", 0), 0u) << "state " << key << " of frozen " << name;
  EXPECT_EQ(model->unfreeze("*.attn.*"), frozen);
  model->zero_grad();
  EXPECT_EQ(backward_gemms(*model, cfg.vocab_size), all_gemms);
}

TEST(Freeze, APatternMatchingNothingIsAnError) {
  const auto model = build_model(preset("gpt2-tiny"), {.seed = 5});
  EXPECT_THAT(testing::error_of([&] { model->freeze("*.q_proj.*"); }),
              ::testing::HasSubstr("no parameter matches '*.q_proj.*'"));
  EXPECT_THAT(testing::error_of([&] { model->unfreeze(""); }),
              ::testing::HasSubstr("[unfreeze] the pattern is empty"));
}

// y = x W^T + (x A^T) B^T with W (32, 32) frozen and A (2, 32), B (32, 2) trainable: AdamW
// fits a rank-2 change of W; W stays bitwise as it was and only A and B hold state.
TEST(Freeze, ALoraShapedProductTrainsOnlyItsFactors) {
  Tensor w = random_tensor({32, 32}, 10), a = random_tensor({2, 32}, 11, DType::f32, -0.1, 0.1);
  Tensor b = Tensor::zeros({32, 2});
  ag::set_requires_grad(a);
  ag::set_requires_grad(b);
  const Tensor x = random_tensor({64, 32}, 12);
  // The target: W plus a rank-2 change u v^T.
  const Tensor u = random_tensor({32, 2}, 13), v = random_tensor({2, 32}, 14);
  const Tensor target = ops::add(ops::linear(x, w, Tensor()),
                                 ops::matmul(ops::matmul(x, v, false, true), u, false, true));
  const std::vector<double> w_before = to_f64(w);
  optim::AdamW opt({{{{"lora_A", a}, {"lora_B", b}, {"base", w}}, 0.0}},
                   optim::AdamWOptions{3e-2, 0.9, 0.999, 1e-8, 0.0});
  double first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    const Tensor y =
        ag::add(ag::linear(x, w, Tensor()), ag::linear(ag::linear(x, a, Tensor()), b, Tensor()));
    const Tensor d = ag::sub(y, target);
    const Tensor loss = ag::mean(ag::mul(d, d));
    (step == 0 ? first : last) = loss.item();
    ag::backward(loss);
    opt.step();
    opt.zero_grad();
  }
  EXPECT_LT(last, 0.05 * first);
  EXPECT_EQ(to_f64(w), w_before);
  for (const auto& [key, state] : opt.state_dict()) EXPECT_NE(key.rfind("base.", 0), 0u) << key;
}

// A module with a weight and a buffer, as a later quantized layer keeps its state.
class WithBuffer : public Module {
 public:
  WithBuffer(std::string path, std::string name, BuildContext& ctx)
      : Module(std::move(path), std::move(name)) {
    weight = register_parameter("weight", {4, 8}, Init::normal(0.02), ctx);
    table = register_buffer("table", {16}, DType::i32, Init::zeros(), ctx);
  }
  Tensor weight, table;
};
class Outer : public Module {
 public:
  explicit Outer(BuildContext& ctx) : Module("", "") {
    inner = &register_module<WithBuffer>("inner", ctx);
  }
  WithBuffer* inner;
};

TEST(Buffers, LiveInTheirOwnCategoryAndStayOutOfTraining) {
  CachingAllocator& cpu = allocator_for(Device::cpu());
  const int64_t before = cpu.by_category()[size_t(Category::buffer)].current;
  BuildContext ctx(BuildOptions{.seed = 1});
  Outer m(ctx);
  EXPECT_EQ(cpu.by_category()[size_t(Category::buffer)].current - before,
            int64_t(round_request(16 * 4)));
  const auto buffers = m.named_buffers();
  ASSERT_EQ(buffers.size(), 1u);
  EXPECT_EQ(buffers[0].first, "inner.table");
  EXPECT_EQ(buffers[0].second.dtype(), DType::i32);
  EXPECT_EQ(buffers[0].second.to_vector<int32_t>(), std::vector<int32_t>(16, 0));
  EXPECT_FALSE(ag::requires_grad(buffers[0].second));
  EXPECT_EQ(m.named_parameters().size(), 1u);
  EXPECT_EQ(m.state_dict().count("inner.table"), 0u);
  EXPECT_THAT(testing::error_of([&] { m.freeze("*.table"); }),
              ::testing::HasSubstr("no parameter matches '*.table'"));
  EXPECT_EQ(m.freeze("inner.*"), 1);
  EXPECT_EQ(category_name(Category::buffer), "buffer");
  EXPECT_EQ(parse_category("buffer"), Category::buffer);
}

}  // namespace
}  // namespace fitgrad::nn
