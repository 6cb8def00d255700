// A training step makes no host read outside logging (issue 26, Note [Host reads] in
// tensor/host_reads.h): the CPU counts the reads that the same code makes on a card, where each
// would drain the kernel queue. Steps with gradient accumulation, global-norm clipping, bf16
// autocast and attention dropout (the composed path with its causal mask), and APOLLO's steps, read
// nothing; the logging read is exactly one; fp16's loss scaler reads once per step (Note [The loss
// scaler's one read]). The counter itself is checked first, so that a zero is not a counter that
// never moves.
#include "tensor/host_reads.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "nn/config.h"
#include "optim/adafactor.h"
#include "optim/adamw.h"
#include "optim/apollo.h"
#include "optim/loss_scaler.h"
#include "tensor/ops/optim_update.h"
#include "train/train_step.h"

namespace fitgrad::train {
namespace {

MicroBatch batch_of(int64_t seed, int64_t vocab) {
  std::vector<int64_t> ids(2 * 17);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = int64_t((i * 37 + size_t(seed) * 11) % size_t(vocab));
  const Tensor all = Tensor::from_vector(ids, {2, 17}, DType::i64);
  return {all.narrow(1, 0, 16).contiguous(), all.narrow(1, 1, 16).contiguous()};
}

// The host reads of `steps` steps of `step` (two micro-batches each), batches made outside.
uint64_t reads_of_steps(TrainStep& step, int64_t steps, int64_t vocab) {
  const MicroBatch a = batch_of(1, vocab), b = batch_of(2, vocab);
  const uint64_t before = host_read_count();
  for (int64_t s = 0; s < steps; ++s) step.run(s, [&](int64_t m) { return m == 0 ? a : b; });
  return host_read_count() - before;
}

TEST(HostReads, TheCounterCountsEveryKindOfRead) {
  const Tensor t = Tensor::full({2}, 3.0);
  uint64_t before = host_read_count();
  t.narrow(0, 0, 1).item();
  EXPECT_EQ(host_read_count() - before, 1u);
  before = host_read_count();
  t.to_vector<float>();
  EXPECT_EQ(host_read_count() - before, 1u);
  before = host_read_count();
  EXPECT_EQ(ops::sum_squares(t), 18.0);
  EXPECT_EQ(host_read_count() - before, 1u);
  before = host_read_count();
  const Tensor acc = ops::zero_doubles(1, Device::cpu());
  ops::sum_squares_add_(t, acc);
  ops::sum_squares_add_(t, acc);
  EXPECT_EQ(host_read_count() - before, 0u);  // summed where the tensors are
  EXPECT_EQ(ops::read_double(acc), 36.0);
  EXPECT_EQ(host_read_count() - before, 1u);
}

TEST(HostReads, AClippedAccumulatingStepReadsNothingAndTheLogReadsOnce) {
  const auto model = nn::build_model(nn::preset("llama-tiny"), {.seed = 3});
  optim::AdamW opt(optim::decay_groups(model->named_parameters(), 0.01), optim::AdamWOptions{});
  const optim::LrSchedule schedule = optim::make_lr_schedule("linear", 1e-3, 0, 10);
  TrainStep step(*model, opt, schedule, {.gradient_accumulation_steps = 2, .max_grad_norm = 0.5});
  EXPECT_EQ(reads_of_steps(step, 3, 256), 0u);
  const uint64_t before = host_read_count();
  const StepLog log = step.take_log();
  EXPECT_EQ(host_read_count() - before, 1u);
  EXPECT_TRUE(std::isfinite(log.mean_loss));
  EXPECT_GT(log.mean_loss, 0.0);
  // A randomly initialised model's first gradients are far above 0.5: the clip applied.
  EXPECT_GT(log.grad_norm, 0.5);
  // The sum restarted: a log with no step since has no loss, and reads once still.
  EXPECT_TRUE(std::isnan(step.take_log().mean_loss));
}

TEST(HostReads, Bf16AutocastWithAttentionDropoutReadsNothing) {
  nn::ModelConfig cfg = nn::preset("gpt2-tiny");
  cfg.attn_pdrop = 0.1;  // dropout inside the flash kernels (Note [Attention dropout])
  cfg.resid_pdrop = 0.1;
  cfg.embd_pdrop = 0.1;
  const auto model = nn::build_model(cfg, {.seed = 4});
  optim::Adafactor opt(optim::decay_groups(model->named_parameters(), 0.0),
                       optim::AdafactorOptions{});
  const optim::LrSchedule schedule = optim::make_lr_schedule("constant", 1e-3, 0, 10);
  TrainStep step(
      *model, opt, schedule,
      {.gradient_accumulation_steps = 2, .max_grad_norm = 1.0, .compute_dtype = DType::bf16});
  EXPECT_EQ(reads_of_steps(step, 2, cfg.vocab_size), 0u);
}

// APOLLO decides its scaling factors and its norm-growth limiter on the device.
TEST(HostReads, ApolloAndApolloMiniReadNothing) {
  const auto model = nn::build_model(nn::preset("llama-tiny"), {.seed = 6});
  for (const optim::ApolloOptions& o : {optim::ApolloOptions{}, optim::apollo_mini_options()}) {
    optim::Apollo opt(optim::decay_groups(model->named_parameters(), 0.1), o);
    const optim::LrSchedule schedule = optim::make_lr_schedule("constant", 1e-3, 0, 10);
    TrainStep step(*model, opt, schedule, {.max_grad_norm = 1.0});
    EXPECT_EQ(reads_of_steps(step, 2, 256), 0u);
  }
}

TEST(HostReads, Fp16LossScalingReadsOncePerStep) {
  const auto model = nn::build_model(nn::preset("llama-tiny"), {.seed = 5});
  optim::AdamW opt(optim::decay_groups(model->named_parameters(), 0.0), optim::AdamWOptions{});
  const optim::LrSchedule schedule = optim::make_lr_schedule("linear", 1e-3, 0, 10);
  optim::LossScaler scaler;
  TrainStep step(*model, opt, schedule,
                 {.gradient_accumulation_steps = 2,
                  .max_grad_norm = 1.0,
                  .compute_dtype = DType::f16,
                  .scaler = &scaler});
  EXPECT_EQ(reads_of_steps(step, 3, 256), 3u);
}

}  // namespace
}  // namespace fitgrad::train
