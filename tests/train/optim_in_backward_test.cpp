// Optimizer-in-backward (Note [Optimizer in backward]): on a tiny Llama the parameters after
// three steps equal, bit for bit, those of the ordinary step (optimizer after backward, no
// clipping), with AdamW and with Adam8bit; on dry runs (meta) of 2-layer models of over 10M
// parameters the gradient category's peak during the step is at most the largest single
// parameter's gradient block (untied embeddings), or that plus the second largest (GPT-2's
// tied embedding, whose gradient spans the backward), where the ordinary step holds the sum
// of all of them. Clipping and the loss scaler are refused with it.
#include <gtest/gtest.h>

#include <algorithm>

#include "autograd/variable.h"
#include "nn/config.h"
#include "optim/adam8bit.h"
#include "optim/adamw.h"
#include "tensor/memory/caching_allocator.h"
#include "tests/tensor/memory/events_since.h"
#include "tests/tensor/ops/op_harness.h"
#include "train/train_step.h"

namespace fitgrad::train {
namespace {

using testing::to_f64;

MicroBatch batch_of(uint64_t seed, Device device = Device::cpu()) {
  std::vector<int64_t> ids(2 * 9);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int64_t((i * 37 + seed * 11) % 256);
  const Tensor all = Tensor::from_vector(ids, {2, 9}, DType::i64);
  return {all.narrow(1, 0, 8).contiguous().to(device), all.narrow(1, 1, 8).contiguous().to(device)};
}

template <class Opt, class Options>
std::vector<std::vector<double>> train_three_steps(bool in_backward) {
  const auto model = nn::build_model(nn::preset("llama-tiny"), {.seed = 3});
  Opt opt(optim::decay_groups(model->named_parameters(), 0.01), Options{});
  const optim::LrSchedule schedule = optim::make_lr_schedule("constant", 1e-3, 0, 10);
  TrainStep step(*model, opt, schedule,
                 {.gradient_accumulation_steps = 2, .optimizer_in_backward = in_backward});
  for (int64_t s = 0; s < 3; ++s)
    step.run(s, [&](int64_t m) { return batch_of(uint64_t(s * 2 + m)); });
  EXPECT_EQ(opt.steps(), 3);
  std::vector<std::vector<double>> out;
  for (const auto& [name, p] : model->named_parameters()) out.push_back(to_f64(p));
  return out;
}

TEST(OptimizerInBackward, GivesTheOrdinaryStepsParametersBitForBit) {
  EXPECT_EQ((train_three_steps<optim::AdamW, optim::AdamWOptions>(true)),
            (train_three_steps<optim::AdamW, optim::AdamWOptions>(false)));
  EXPECT_EQ((train_three_steps<optim::Adam8bit, optim::Adam8bitOptions>(true)),
            (train_three_steps<optim::Adam8bit, optim::Adam8bitOptions>(false)));
}

struct GradientPeak {
  int64_t peak = 0;     // the gradient category's peak over one step, above its start
  int64_t largest = 0;  // the largest parameter's gradient block
  int64_t second = 0;   // the second largest
  int64_t all = 0;      // every parameter's gradient block
};

// One dry-run step (on meta) of a 2-layer model, after a first step made the state.
GradientPeak gradient_peak(nn::ModelConfig cfg, bool in_backward) {
  cfg.num_layers = 2;
  const auto model = nn::build_model(cfg, {.device = Device::meta()});
  EXPECT_GE(model->num_parameters(), 10'000'000);
  optim::AdamW opt(optim::decay_groups(model->named_parameters(), 0.0), optim::AdamWOptions{});
  const optim::LrSchedule schedule = optim::make_lr_schedule("constant", 1e-3, 0, 10);
  TrainStep step(*model, opt, schedule, {.optimizer_in_backward = in_backward});
  CachingAllocator& meta = allocator_for(Device::meta());
  const MicroBatch batch = batch_of(1, Device::meta());
  step.run(0, [&](int64_t) { return batch; });
  meta.reset_peak_stats();
  const int64_t before = meta.by_category()[size_t(Category::gradient)].current;
  const uint64_t first = meta.total_events();
  step.run(1, [&](int64_t) { return batch; });
  GradientPeak g;
  g.peak = meta.by_category()[size_t(Category::gradient)].peak - before;
  // Each gradient's block as the allocator handed it out (its policy's rounding): allocated
  // as a gradient, or adopted from a backward output (retagged to the gradient category).
  for (const MemoryEvent& e : testing::events_since(first, Device::meta())) {
    if (e.category != Category::gradient ||
        (e.kind != EventKind::alloc && e.kind != EventKind::retag_to))
      continue;
    const int64_t block = int64_t(e.size);
    g.all += block;
    if (block > g.largest) {
      g.second = g.largest;
      g.largest = block;
    } else {
      g.second = std::max(g.second, block);
    }
  }
  std::printf("%s%s: gradient peak %lld bytes (largest parameter %lld, all %lld)\n",
              cfg.tie_word_embeddings ? "tied" : "untied", in_backward ? " in backward" : "",
              (long long)g.peak, (long long)g.largest, (long long)g.all);
  return g;
}

TEST(OptimizerInBackward, AtMostOneParameterGradientIsAlive) {
  nn::ModelConfig untied = nn::preset("llama-tiny");
  untied.hidden_size = 512;
  untied.intermediate_size = 1376;
  untied.vocab_size = 16000;
  untied.tie_word_embeddings = false;
  const GradientPeak in_backward = gradient_peak(untied, true);
  const GradientPeak ordinary = gradient_peak(untied, false);
  EXPECT_LE(in_backward.peak, in_backward.largest);
  EXPECT_GE(ordinary.peak, ordinary.all);
}

TEST(OptimizerInBackward, ATiedEmbeddingsGradientLivesThroughTheBackward) {
  // GPT-2 shares its embedding with the head: that gradient is started by the head's
  // backward and final only after the embedding's, so it is alive beside one other.
  nn::ModelConfig gpt2 = nn::preset("gpt2");
  gpt2.embd_pdrop = gpt2.attn_pdrop = gpt2.resid_pdrop = 0;
  const GradientPeak in_backward = gradient_peak(gpt2, true);
  const GradientPeak ordinary = gradient_peak(gpt2, false);
  EXPECT_LE(in_backward.peak, in_backward.largest + in_backward.second);
  EXPECT_GE(ordinary.peak, ordinary.all);
}

// The hooks must not keep their parameters alive (a hook holding its own parameter is a
// cycle through the parameter's autograd data), and a frozen parameter gets none: with
// the base frozen and only the norms trained, the model's memory comes back whole.
TEST(OptimizerInBackward, TheHooksLeaveNothingBehindAndSkipFrozenParameters) {
  CachingAllocator& alloc = allocator_for(Device::cpu());
  const int64_t before = alloc.stats().allocated_bytes[kAllPools].current;
  {
    const auto model = nn::build_model(nn::preset("llama-tiny"), {.seed = 3});
    std::vector<std::pair<std::string, Tensor>> trained;
    for (const auto& [name, p] : model->named_parameters()) {
      const bool norm = name.find("norm") != std::string::npos;
      autograd::set_requires_grad(p, norm);
      if (norm) trained.emplace_back(name, p);
    }
    optim::AdamW opt(optim::decay_groups(trained, 0.0), optim::AdamWOptions{});
    const optim::LrSchedule schedule = optim::make_lr_schedule("constant", 1e-3, 0, 10);
    TrainStep step(*model, opt, schedule, {.optimizer_in_backward = true});
    step.run(0, [&](int64_t m) { return batch_of(uint64_t(m)); });
    EXPECT_EQ(opt.steps(), 1);
    EXPECT_GT(alloc.stats().allocated_bytes[kAllPools].current, before);
  }
  EXPECT_EQ(alloc.stats().allocated_bytes[kAllPools].current, before);
}

TEST(OptimizerInBackward, RefusesClippingAndTheLossScaler) {
  const auto model = nn::build_model(nn::preset("llama-tiny"), {.seed = 3});
  optim::AdamW opt(optim::decay_groups(model->named_parameters(), 0.0), optim::AdamWOptions{});
  const optim::LrSchedule schedule = optim::make_lr_schedule("constant", 1e-3, 0, 10);
  testing::expect_error(
      [&] {
        TrainStep(*model, opt, schedule, {.max_grad_norm = 1.0, .optimizer_in_backward = true});
      },
      "[train step]", "cannot clip by the global norm");
  optim::LossScaler scaler;
  testing::expect_error(
      [&] { TrainStep(*model, opt, schedule, {.scaler = &scaler, .optimizer_in_backward = true}); },
      "[train step]", "loss scaler");
}

}  // namespace
}  // namespace fitgrad::train
