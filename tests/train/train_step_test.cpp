// train::TrainStep with fp16's loss scaler (Note [Dynamic loss scaling]): a scale so large
// that the scaled loss overflows makes the step find inf gradients, so it skips the update
// (parameters and optimizer untouched, the learning rate schedule not advanced) and halves
// the scale; the next step, at a finite scale, updates.
#include "train/train_step.h"

#include <gtest/gtest.h>

#include <cmath>

#include "nn/config.h"
#include "optim/adamw.h"
#include "optim/sgd.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::train {
namespace {

using testing::to_f64;

TEST(TrainStep, AnOverflowingScaleSkipsTheUpdateAndBacksOff) {
  const auto model = nn::build_model(nn::preset("llama-tiny"), {.seed = 2});
  optim::AdamW opt(optim::decay_groups(model->named_parameters(), 0.0), optim::AdamWOptions{});
  const optim::LrSchedule schedule = optim::make_lr_schedule("linear", 1e-3, 0, 10);
  // 2^127 times a loss of about 5.5 is beyond f32: the backward's gradients overflow.
  optim::LossScaler scaler({.init_scale = std::ldexp(1.0, 127)});
  TrainStep step(*model, opt, schedule, {.compute_dtype = DType::f16, .scaler = &scaler});
  std::vector<int64_t> ids(2 * 9);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int64_t((i * 37) % 256);
  const Tensor all = Tensor::from_vector(ids, {2, 9}, DType::i64);
  const MicroBatch batch{all.narrow(1, 0, 8).contiguous(), all.narrow(1, 1, 8).contiguous()};
  const auto before = to_f64(model->parameter("model.layers.0.mlp.up_proj.weight"));

  const StepResult skipped = step.run(0, [&](int64_t) { return batch; });
  EXPECT_TRUE(skipped.skipped);
  EXPECT_EQ(opt.steps(), 0);
  EXPECT_EQ(to_f64(model->parameter("model.layers.0.mlp.up_proj.weight")), before);
  EXPECT_EQ(scaler.scale(), std::ldexp(1.0f, 126));
  EXPECT_EQ(skipped.learning_rate, schedule.lr_at(0));

  // At the default scale (2^16) the next step updates, at the schedule's first rate.
  scaler = optim::LossScaler();
  const StepResult taken = step.run(1, [&](int64_t) { return batch; });
  EXPECT_FALSE(taken.skipped);
  EXPECT_EQ(opt.steps(), 1);
  EXPECT_EQ(taken.learning_rate, schedule.lr_at(0));  // the skipped step did not advance it
  EXPECT_NE(to_f64(model->parameter("model.layers.0.mlp.up_proj.weight")), before);
  EXPECT_TRUE(std::isfinite(step.take_log().mean_loss));
}

// Note [Loss over trained targets]: two micro-batches with 15 and 2 trained targets (the rest
// -100), accumulated with weight_by_targets, update SGD's parameters as one batch of both rows
// does, whose cross-entropy is the mean over all 17; the plain mean of the two means (each
// micro-batch 1 / 2) moves them elsewhere, and so does the logged loss.
TEST(TrainStep, WeightedAccumulationEqualsOneBatchOfEveryTrainedTarget) {
  std::vector<int64_t> ids(2 * 17), targets(2 * 16, -100);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int64_t((i * 37 + 5) % 256);
  for (int64_t t = 0; t < 16; ++t) {
    if (t > 0) targets[size_t(t)] = ids[size_t(t + 1)];              // row 0: 15 targets
    if (t >= 14) targets[size_t(16 + t)] = ids[size_t(17 + t + 1)];  // row 1: 2 targets
  }
  const Tensor x = Tensor::from_vector(ids, {2, 17}, DType::i64).narrow(1, 0, 16).contiguous();
  const Tensor y = Tensor::from_vector(targets, {2, 16}, DType::i64);
  const std::string probe = "model.layers.0.self_attn.q_proj.weight";
  const auto after = [&](int64_t accum, bool weighted, double* logged) {
    const auto model = nn::build_model(nn::preset("llama-tiny"), {.seed = 3});
    optim::SGD opt(optim::decay_groups(model->named_parameters(), 0.0), {.lr = 1.0});
    const optim::LrSchedule schedule = optim::make_lr_schedule("constant", 1.0, 0, 10);
    TrainStep step(*model, opt, schedule,
                   {.gradient_accumulation_steps = accum, .weight_by_targets = weighted});
    step.run(0, [&](int64_t m) {
      if (accum == 1) return MicroBatch{x, y, 17};
      return MicroBatch{x.narrow(0, m, 1).contiguous(), y.narrow(0, m, 1).contiguous(),
                        m == 0 ? 15 : 2};
    });
    *logged = step.take_log().mean_loss;
    return to_f64(model->parameter(probe));
  };
  double one_loss = 0, weighted_loss = 0, plain_loss = 0;
  const std::vector<double> one = after(1, false, &one_loss);
  const std::vector<double> weighted = after(2, true, &weighted_loss);
  const std::vector<double> plain = after(2, false, &plain_loss);
  double err = 0, off = 0;
  for (size_t i = 0; i < one.size(); ++i) {
    err = std::max(err, std::fabs(weighted[i] - one[i]));
    off = std::max(off, std::fabs(plain[i] - one[i]));
  }
  EXPECT_LT(err, 1e-6);
  EXPECT_GT(off, 1e3 * err);
  EXPECT_NEAR(weighted_loss, one_loss, 1e-5);
  EXPECT_GT(std::fabs(plain_loss - one_loss), 1e-3);
}

}  // namespace
}  // namespace fitgrad::train
