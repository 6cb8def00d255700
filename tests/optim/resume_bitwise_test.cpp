// Resume is bitwise for every optimizer of issue 12: four steps, then the state_dict is
// copied (as a checkpoint would save it) into a fresh optimizer over copies of the
// parameters, and four more steps on both give bit-identical parameters and state. The
// optimizers: AdamW, Adam8bit (8-bit and f32 paths), both Adafactors, and AdamW, Adam8bit,
// Adafactor and SGD on bf16 parameters with stochastic rounding, whose Philox offset must
// come back too.
#include <gtest/gtest.h>

#include <functional>
#include <memory>

#include "autograd/variable.h"
#include "optim/adafactor.h"
#include "optim/adam8bit.h"
#include "optim/adamw.h"
#include "optim/sgd.h"
#include "tests/optim/random_steps.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::optim {
namespace {

using Make = std::function<std::unique_ptr<Optimizer>(std::vector<ParamGroup>)>;

std::vector<ParamGroup> fresh_params(DType dtype) {
  std::vector<ParamGroup> groups(2);
  groups[0].weight_decay = 0.01;
  groups[0].params = {{"w", testing::random_tensor({80, 64}, 1).to(dtype)},
                      {"m", testing::random_tensor({3, 5, 4}, 2).to(dtype)}};
  groups[1].params = {{"b", testing::random_tensor({64}, 3).to(dtype)}};
  for (auto& g : groups)
    for (auto& [name, p] : g.params) autograd::set_requires_grad(p);
  return groups;
}

void step_with_grads(Optimizer& opt, int step) {
  testing::step_with_grads(opt, uint64_t(100 + step * 7), 0.1);
}

using testing::snapshot;

void expect_bitwise_resume(const Make& make, DType dtype, bool stochastic) {
  auto a = make(fresh_params(dtype));
  if (stochastic) a->set_stochastic_rounding(7);
  for (int s = 0; s < 4; ++s) step_with_grads(*a, s);
  // The resumed run: parameters as saved, state through state_dict.
  std::vector<ParamGroup> copied = a->groups();
  for (auto& g : copied)
    for (auto& [name, p] : g.params) {
      p = p.clone();
      autograd::set_requires_grad(p);
    }
  auto b = make(std::move(copied));
  if (stochastic) b->set_stochastic_rounding(7);
  std::map<std::string, Tensor> saved;
  for (const auto& [key, t] : a->state_dict()) saved[key] = t.clone();
  b->load_state_dict(saved);
  for (int s = 4; s < 8; ++s) {
    step_with_grads(*a, s);
    step_with_grads(*b, s);
  }
  EXPECT_EQ(snapshot(*a), snapshot(*b)) << a->name();
}

TEST(ResumeBitwise, EveryOptimizer) {
  expect_bitwise_resume(
      [](auto g) { return std::make_unique<AdamW>(std::move(g), AdamWOptions{}); }, DType::f32,
      false);
  expect_bitwise_resume(
      [](auto g) {
        Adam8bitOptions o;
        o.min_8bit_size = 4096;  // w (5120) is 8-bit, m and b keep f32 state
        return std::make_unique<Adam8bit>(std::move(g), o);
      },
      DType::f32, false);
  expect_bitwise_resume(
      [](auto g) { return std::make_unique<Adafactor>(std::move(g), AdafactorOptions{}); },
      DType::f32, false);
  expect_bitwise_resume(
      [](auto g) { return std::make_unique<AdafactorHF>(std::move(g), AdafactorHFOptions{}); },
      DType::f32, false);
}

TEST(ResumeBitwise, StochasticRoundingOfBf16ParametersResumesItsStream) {
  expect_bitwise_resume(
      [](auto g) { return std::make_unique<AdamW>(std::move(g), AdamWOptions{}); }, DType::bf16,
      true);
  expect_bitwise_resume(
      [](auto g) { return std::make_unique<Adam8bit>(std::move(g), Adam8bitOptions{}); },
      DType::bf16, true);
  expect_bitwise_resume(
      [](auto g) { return std::make_unique<Adafactor>(std::move(g), AdafactorOptions{}); },
      DType::bf16, true);
  expect_bitwise_resume(
      [](auto g) {
        return std::make_unique<SGD>(std::move(g), SgdOptions{1e-2, 0.9, 0.0, false});
      },
      DType::bf16, true);
}

TEST(StochasticRounding, KeepsUpdatesBelowHalfAnUlpInExpectation) {
  // 4096 bf16 weights at 1.0 (spacing 2^-7 below 1) take 50 AdamW steps of about lr = 1e-4
  // each (a constant gradient: Adam's normalised step is lr): round-to-nearest loses every
  // one, stochastic rounding keeps their sum on average.
  for (bool stochastic : {false, true}) {
    SCOPED_TRACE(stochastic ? "stochastic" : "nearest");
    std::vector<ParamGroup> g(1);
    Tensor w = Tensor::full({4096}, 1.0, DType::bf16);
    autograd::set_requires_grad(w);
    g[0].params = {{"w", w}};
    AdamWOptions o;
    o.lr = 1e-4;
    AdamW opt(std::move(g), o);
    if (stochastic) opt.set_stochastic_rounding(3);
    for (int s = 0; s < 50; ++s) {
      autograd::ensure_meta(w).grad = Tensor::full({4096}, 1.0, DType::bf16);
      opt.step();
    }
    double mean = 0;
    for (double x : testing::to_f64(w)) mean += x / 4096;
    if (stochastic)
      EXPECT_NEAR(mean, 1.0 - 50 * 1e-4, 2e-4);
    else
      EXPECT_EQ(mean, 1.0);
  }
}

}  // namespace
}  // namespace fitgrad::optim
