// GRPO's rows (train/objectives/grpo_rows.h, Note [GRPO rows]): the (B, L) layout of prompts
// and completions of different lengths, the truncated completions' mask, a row's
// log-probabilities independent of the other rows and their padding, and the reference's
// equal to the base model's (the adapter off) on the tiny Llama + PEFT adapter of peft_tiny.
#include "train/objectives/grpo_rows.h"

#include <gtest/gtest.h>

#include "tests/golden/peft_tiny_model.h"
#include "train/model_source.h"

namespace fitgrad::train {
namespace {

const std::vector<std::vector<int32_t>> kPrompts = {{5, 6, 7}, {8}, {9, 10}};
const std::vector<std::vector<int32_t>> kCompletions = {{11, 12}, {13, 14, 15, 16}, {17}};

TEST(GrpoRows, EachCompletionFollowsItsPromptWithTargetsOnItsTokens) {
  GrpoConfig cfg;
  const GrpoRows r = grpo_rows(kPrompts, kCompletions, {false, true, false}, cfg, 0);
  ASSERT_EQ(r.rows, 3);
  ASSERT_EQ(r.length, 5);
  EXPECT_EQ(r.ids.to_vector<int64_t>(),
            (std::vector<int64_t>{5, 6, 7, 11, 12, 8, 13, 14, 15, 16, 9, 10, 17, 0, 0}));
  EXPECT_EQ(r.targets.to_vector<int64_t>(),
            (std::vector<int64_t>{-100, -100, 11, 12, -100, 13, 14, 15, 16, -100, -100, 17, -100,
                                  -100, -100}));
  EXPECT_EQ(r.mask, (std::vector<double>{0, 0, 1, 1, 0, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0}));
  cfg.mask_truncated_completions = true;
  const GrpoRows masked = grpo_rows(kPrompts, kCompletions, {false, true, false}, cfg, 0);
  EXPECT_EQ(masked.mask, (std::vector<double>{0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}));
  EXPECT_THROW(grpo_rows({{}}, {{1}}, {false}, cfg, 0), Error);
  EXPECT_THROW(grpo_rows(kPrompts, kCompletions, {false}, cfg, 0), Error);
}

TEST(GrpoRows, ARowsLogProbabilitiesDoNotDependOnTheOthersOrOnThePadding) {
  const auto model = testing::peft_tiny_adapted_model();
  const GrpoConfig cfg;
  const GrpoRows all = grpo_rows(kPrompts, kCompletions, {false, false, false}, cfg, 0);
  const std::vector<double> together = grpo_host_logprobs(*model, all, 0.9, false);
  for (size_t b = 0; b < kPrompts.size(); ++b) {
    const GrpoRows one = grpo_rows({kPrompts[b]}, {kCompletions[b]}, {false}, cfg, 0);
    const std::vector<double> alone = grpo_host_logprobs(*model, one, 0.9, false);
    for (int64_t j = 0; j < one.length; ++j) {
      const double want = alone[size_t(j)], got = together[b * size_t(all.length) + size_t(j)];
      EXPECT_NEAR(got, want, 1e-5) << "row " << b << " position " << j;
      EXPECT_EQ(want != 0.0, all.mask[b * size_t(all.length) + size_t(j)] != 0.0);
    }
  }
}

TEST(GrpoRows, TheReferenceIsTheModelWithItsAdapterOff) {
  const auto model = testing::peft_tiny_adapted_model();
  const auto base = load_model(testing::golden_path("peft_tiny/base"), "", {}).model;
  const GrpoConfig cfg;
  const GrpoRows r = grpo_rows(kPrompts, kCompletions, {false, false, false}, cfg, 0);
  model->train(true);
  const std::vector<double> ref = grpo_host_logprobs(*model, r, 1.0, true);
  const std::vector<double> want = grpo_host_logprobs(*base, r, 1.0, false);
  const std::vector<double> policy = grpo_host_logprobs(*model, r, 1.0, false);
  double moved = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(ref[i], want[i], 1e-5) << i;
    moved = std::max(moved, std::abs(policy[i] - want[i]));
  }
  EXPECT_GT(moved, 1e-4) << "the adapter changes nothing: the test would not see it left on";
  EXPECT_TRUE(model->training()) << "the model's mode is restored";
}

}  // namespace
}  // namespace fitgrad::train
