// train::TrainStep with fp16's loss scaler (Note [Dynamic loss scaling]): a scale so large
// that the scaled loss overflows makes the step find inf gradients, so it skips the update
// (parameters and optimizer untouched, the learning rate schedule not advanced) and halves
// the scale; the next step, at a finite scale, updates.
#include "train/train_step.h"

#include <gtest/gtest.h>

#include <cmath>

#include "nn/config.h"
#include "optim/adamw.h"
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

}  // namespace
}  // namespace fitgrad::train
