// Why fp16 needs the loss scaler (Note [Dynamic loss scaling]): a loss whose gradients are
// small (here the model's loss times 1e-6, as a loss averaged over very many tokens would
// be) has backward values below f16's smallest subnormal (6e-8), which flush to zero. Under
// f16 autocast every gradient is then exactly zero and ten AdamW steps leave the loss where
// it was; with the scaler (2^16) the same backward keeps its values, the unscaled gradients
// match an fp32 backward to a few percent, and the ten steps lower the loss.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "nn/config.h"
#include "nn/decoder.h"
#include "optim/adamw.h"
#include "optim/loss_scaler.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad {
namespace {

using testing::to_f64;

constexpr double kSmall = 1e-6;

struct Batch {
  Tensor ids, targets;
};

Batch batch() {
  std::vector<int64_t> v(4 * 17);
  for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t((i * 53 + 7) % 256);
  const Tensor all = Tensor::from_vector(v, {4, 17}, DType::i64);
  return {all.narrow(1, 0, 16).contiguous(), all.narrow(1, 1, 16).contiguous()};
}

// The gradient of one weight after a backward of kSmall * loss, in f16 autocast with the loss
// multiplied by `scale` and the gradients divided by it again (1: no scaler), or in f32.
std::vector<double> small_gradient(nn::CausalLM& model, DType compute, float scale) {
  model.zero_grad();
  const Batch b = batch();
  {
    autograd::AutocastGuard autocast(compute);
    autograd::backward(autograd::scale(model.loss(b.ids, b.targets), kSmall * scale));
  }
  std::vector<Tensor> params;
  for (auto& [name, p] : model.named_parameters()) params.push_back(p);
  if (scale != 1.0f) {
    optim::LossScaler scaler({.init_scale = scale});
    EXPECT_FALSE(scaler.unscale_and_check(params));
  }
  return to_f64(autograd::grad(model.parameter("model.layers.0.mlp.up_proj.weight")));
}

double relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

TEST(Fp16LossScaling, SmallGradientsUnderflowWithoutTheScaler) {
  const auto model = nn::build_model(nn::preset("llama-tiny"), {.seed = 5});
  const auto f32 = small_gradient(*model, DType::f32, 1.0f);
  const auto unscaled = small_gradient(*model, DType::f16, 1.0f);
  const auto scaled = small_gradient(*model, DType::f16, 65536.0f);
  int64_t nonzero = 0;
  for (double g : unscaled) nonzero += g != 0;
  EXPECT_EQ(nonzero, 0) << "of " << unscaled.size();
  EXPECT_LT(relative_error(scaled, f32), 0.05);
}

double train_ten_steps(bool with_scaler) {
  const auto model = nn::build_model(nn::preset("llama-tiny"), {.seed = 5});
  optim::AdamW opt(optim::decay_groups(model->named_parameters(), 0.0), {.lr = 3e-3});
  std::vector<Tensor> params;
  for (auto& [name, p] : model->named_parameters()) params.push_back(p);
  const Batch b = batch();
  optim::LossScaler scaler;
  for (int s = 0; s < 10; ++s) {
    model->zero_grad();
    {
      autograd::AutocastGuard autocast(DType::f16);
      const double factor = kSmall * (with_scaler ? double(scaler.scale()) : 1.0);
      autograd::backward(autograd::scale(model->loss(b.ids, b.targets), factor));
    }
    const bool found_inf = with_scaler && scaler.unscale_and_check(params);
    if (!found_inf) opt.step();
    if (with_scaler) scaler.update(found_inf);
  }
  autograd::NoGradGuard no_grad;
  return model->loss(b.ids, b.targets).item();
}

TEST(Fp16LossScaling, TrainsWithTheScalerAndStallsWithout) {
  const auto model = nn::build_model(nn::preset("llama-tiny"), {.seed = 5});
  const Batch b = batch();
  double initial;
  {
    autograd::NoGradGuard no_grad;
    initial = model->loss(b.ids, b.targets).item();
  }
  EXPECT_EQ(train_ten_steps(false), initial);
  EXPECT_LT(train_ten_steps(true), initial - 0.1);
}

}  // namespace
}  // namespace fitgrad
