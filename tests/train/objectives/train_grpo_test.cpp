// GRPO's steps (train/objectives/grpo.h, Note [GRPO steps]) through train::TrainStep on
// llama-tiny with random weights: each step samples its completions, scores them with a
// reward of the test's and a --reward_command program (awk, rewarding the completions that
// ran to the length limit), and trains on them; over 24 steps the mean reward of the last
// generation batches is above the first's. A generation batch is reused num_iterations
// times, and the generation's statistics reach the step's metrics once per batch.
#include <gtest/gtest.h>

#include "optim/adamw.h"
#include "optim/schedule.h"
#include "tests/train/objectives/even_share_reward.h"
#include "train/model_source.h"
#include "train/objectives/grpo.h"
#include "train/rewards/reward_command.h"
#include "train/train_step.h"

namespace fitgrad::train {
namespace {

using testing::EvenShare;

std::shared_ptr<GrpoObjective> grpo(int64_t num_iterations) {
  GrpoConfig cfg;
  cfg.num_generations = 4;
  cfg.max_completion_length = 6;
  auto objective = std::make_shared<GrpoObjective>(cfg, 1.0);
  GrpoSampling s;
  s.settings.num_iterations = num_iterations;
  for (int32_t id = 1; id < 60; id += 2) s.settings.generation.stop_ids.push_back(id);
  s.functions.push_back(std::make_unique<EvenShare>());
  s.functions.push_back(std::make_unique<rewards::CommandReward>(
      R"(awk -F"\"truncated\":" '{print ($2 ~ /^true/) ? 1 : 0}')", 30));
  s.seed = 11;
  s.prompts = [](int64_t n) {
    return std::vector<GrpoPrompt>{{{10, 20, int32_t(30 + n % 5)}, "a", {}},
                                   {{11, 21, 31, 41}, "b", {}}};
  };
  objective->sample_with(std::move(s));
  return objective;
}

// llama-tiny trained by AdamW at a constant `lr`, two micro-batches a step.
struct GrpoRun {
  GrpoRun(std::shared_ptr<GrpoObjective> objective, double lr)
      : m(load_model("llama-tiny", "", {.seed = 7})),
        opt(optim::decay_groups(m.model->named_parameters(), 0.0), {}),
        schedule(optim::make_lr_schedule("constant", lr, 0, 100)),
        step(*m.model, opt, schedule,
             {.gradient_accumulation_steps = 2, .objective = std::move(objective)}) {}
  LoadedModel m;
  optim::AdamW opt;
  optim::LrSchedule schedule;
  TrainStep step;
};

TEST(TrainGrpo, TheRewardRisesOverTheSteps) {
  GrpoRun run(grpo(1), 1e-2);
  TrainStep& step = run.step;
  std::vector<double> rewards;
  for (int64_t t = 0; t < 24; ++t) {
    step.run(t, nullptr);
    const std::map<std::string, double> means = step.take_metrics().means();
    ASSERT_TRUE(means.contains("reward") && means.contains("rewards/even_share/mean") &&
                means.contains("completions/mean_length") && means.contains("clip_ratio/low_mean"))
        << t;
    rewards.push_back(means.at("reward"));
  }
  const double first = (rewards[0] + rewards[1] + rewards[2] + rewards[3]) / 4;
  const double last = (rewards[20] + rewards[21] + rewards[22] + rewards[23]) / 4;
  EXPECT_GT(last, first + 0.3) << "first " << first << ", last " << last;
}

TEST(TrainGrpo, AGenerationBatchIsReusedNumIterationsTimes) {
  const auto objective = grpo(2);
  GrpoRun run(objective, 1e-3);
  TrainStep& step = run.step;
  std::vector<const GrpoGeneration*> seen;
  std::vector<bool> logged;
  for (int64_t t = 0; t < 4; ++t) {
    step.run(t, nullptr);
    seen.push_back(objective->last_generation());
    logged.push_back(step.take_metrics().means().contains("reward"));
    EXPECT_FALSE(objective->last_generation()->micro_batches[0].grpo->old_logp.empty());
  }
  EXPECT_EQ(logged, (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(seen[0]->completions.size(), 8u);
}

}  // namespace
}  // namespace fitgrad::train
