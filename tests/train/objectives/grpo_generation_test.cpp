// GRPO's generation batch (train/objectives/grpo_generation.h, Note [GRPO generation batch]) on
// llama-tiny with random weights: the completions are cut in order into equal micro-batches
// whose rows train each completion with its stop token, the advantages are centred per group
// and the logged reward is the rewards' mean; the old and reference log-probabilities are
// computed only when asked for (and, without an adapter, equal the model's); an SGD step on
// the micro-batches' GRPO loss raises the advantage-weighted log-probability of the sampled
// completions (the policy gradient's direction); a failing reward program stops the batch
// with an error naming it.
#include "train/objectives/grpo_generation.h"

#include <gtest/gtest.h>

#include <cmath>

#include "autograd/tape.h"
#include "optim/sgd.h"
#include "tests/train/objectives/even_share_reward.h"
#include "train/model_source.h"
#include "train/objectives/grpo.h"
#include "train/objectives/grpo_rows.h"
#include "train/rewards/reward_command.h"

namespace fitgrad::train {
namespace {

using testing::EvenShare;

LoadedModel tiny() { return load_model("llama-tiny", "", {.seed = 7}); }

std::vector<GrpoPrompt> prompts() {
  return {{{10, 20, 30, 40, 50}, "a", {{"answer", "1"}}}, {{11, 21, 31}, "b", {{"answer", "2"}}}};
}

GrpoGenerationSettings settings() {
  GrpoGenerationSettings s;
  s.config.num_generations = 4;
  s.config.max_completion_length = 6;
  s.generation.sampling.temperature = 1.0;
  for (int32_t id = 1; id < 60; id += 2) s.generation.stop_ids.push_back(id);  // odd ids stop
  return s;
}

rewards::RewardFunctions even_share() {
  rewards::RewardFunctions f;
  f.push_back(std::make_unique<EvenShare>());
  return f;
}

TEST(GrpoGeneration, MicroBatchesTrainEachCompletionWithItsStopTokenAndCentredAdvantages) {
  LoadedModel m = tiny();
  Generator gen(3);
  const GrpoGeneration g =
      grpo_generation(*m.model, nullptr, prompts(), settings(), even_share(), 2, gen);
  ASSERT_EQ(g.completions.size(), 8u);
  ASSERT_EQ(g.micro_batches.size(), 2u);
  int64_t stopped = 0;
  double reward_sum = 0;
  for (size_t i = 0; i < 8; ++i) {
    const Completion& c = g.completions[i];
    const MicroBatch& b = g.micro_batches[i / 4];
    ASSERT_EQ(b.ids.size(0), 4);
    const auto row = int64_t(i % 4), length = b.ids.size(1);
    const std::vector<int64_t> targets = b.targets.to_vector<int64_t>();
    std::vector<int32_t> want = c.ids;
    if (c.stop >= 0) want.push_back(c.stop), ++stopped;
    EXPECT_EQ(c.truncated, c.stop < 0) << i;
    std::vector<int32_t> got;
    for (int64_t j = 0; j < length; ++j)
      if (targets[size_t(row * length + j)] != -100)
        got.push_back(int32_t(targets[size_t(row * length + j)]));
    EXPECT_EQ(got, want) << i;
    reward_sum += g.rewards[i];
  }
  EXPECT_GT(stopped, 0);  // the stop tokens are trained
  for (size_t p = 0; p < 2; ++p) {
    const auto& adv = g.micro_batches[p].grpo->advantages;
    double sum = 0;
    for (const double a : adv) sum += a;
    EXPECT_NEAR(sum, 0.0, 1e-9) << p;
  }
  EXPECT_NEAR(g.metrics.means().at("reward"), reward_sum / 8, 1e-6);
  EXPECT_TRUE(g.metrics.means().contains("rewards/even_share/mean"));
  EXPECT_TRUE(g.micro_batches[0].grpo->old_logp.empty());  // on-policy: none
  EXPECT_TRUE(g.micro_batches[0].grpo->ref_logp.empty());  // beta 0: none
}

TEST(GrpoGeneration, OldAndReferenceLogProbabilitiesWhenAskedFor) {
  LoadedModel m = tiny();
  GrpoGenerationSettings s = settings();
  s.num_iterations = 2;
  s.config.beta = 0.04;
  Generator gen(3);
  const GrpoGeneration g = grpo_generation(*m.model, nullptr, prompts(), s, even_share(), 1, gen);
  const GrpoMicroBatch& b = *g.micro_batches[0].grpo;
  ASSERT_EQ(b.old_logp.size(), size_t(g.micro_batches[0].ids.numel()));
  // No adapter: the reference is the model itself.
  for (size_t i = 0; i < b.old_logp.size(); ++i) EXPECT_DOUBLE_EQ(b.ref_logp[i], b.old_logp[i]);
}

TEST(GrpoGeneration, AnSgdStepRaisesTheAdvantageWeightedLogProbability) {
  LoadedModel m = tiny();
  m.model->train();
  const GrpoGenerationSettings s = settings();
  Generator gen(5);
  const GrpoGeneration g = grpo_generation(*m.model, nullptr, prompts(), s, even_share(), 2, gen);
  const auto objective = [&] {  // sum_b A_b sum_t m logp
    double j = 0;
    for (const MicroBatch& b : g.micro_batches) {
      GrpoRows r;
      r.ids = b.ids, r.targets = b.targets, r.rows = b.ids.size(0), r.length = b.ids.size(1);
      const std::vector<double> logp = grpo_host_logprobs(*m.model, r, s.temperature, false);
      for (int64_t row = 0; row < r.rows; ++row)
        for (int64_t t = 0; t < r.length; ++t)
          j += b.grpo->advantages[size_t(row)] * b.grpo->mask[size_t(row * r.length + t)] *
               logp[size_t(row * r.length + t)];
    }
    return j;
  };
  const double before = objective();
  optim::SGD sgd({{m.model->named_parameters()}}, {.lr = 0.05});
  GrpoObjective grpo(s.config, s.temperature);
  for (const MicroBatch& b : g.micro_batches) autograd::backward(grpo.loss(*m.model, b, {}));
  sgd.step();
  EXPECT_GT(objective(), before);
}

TEST(GrpoGeneration, AFailingRewardProgramIsAnErrorNamingIt) {
  LoadedModel m = tiny();
  rewards::RewardFunctions f;
  f.push_back(std::make_unique<rewards::CommandReward>("/nonexistent/grpo_score --strict", 5));
  Generator gen(3);
  try {
    grpo_generation(*m.model, nullptr, prompts(), settings(), f, 2, gen);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("grpo_score"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fitgrad::train
