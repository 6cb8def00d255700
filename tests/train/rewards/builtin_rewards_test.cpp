// The built-in GRPO rewards (train/rewards/): answer extraction and comparison
// (Note [Comparing answers]), the format pattern as Python's re.match with DOTALL, DAPO's soft
// overlong punishment at the values of TRL's documented example, the weighted nansum of
// several functions as TRL combines them (Note [Rewards as TRL scores them]), and the
// --reward_funcs list (Note [Reward function lists]).
#include <gtest/gtest.h>

#include <cmath>

#include "tests/tensor/ops/op_harness.h"
#include "train/rewards/answer_match.h"
#include "train/rewards/format_reward.h"
#include "train/rewards/length_penalty.h"
#include "train/rewards/reward_funcs.h"

namespace fitgrad::train::rewards {
namespace {

using fitgrad::testing::expect_error;

RewardSample sample(std::string completion, nlohmann::json row = nlohmann::json::object()) {
  RewardSample s;
  s.completion = std::move(completion);
  s.row = std::move(row);
  return s;
}

std::vector<double> score(RewardFunction& f, const std::vector<RewardSample>& samples) {
  return f.score(samples);
}

TEST(AnswerExtraction, BoxedTakesTheLastBalancedBoxWithNestedBraces) {
  EXPECT_EQ(boxed_answer("first \\boxed{\\frac{1}{2}} then \\boxed{a{b}c}."), "a{b}c");
  EXPECT_EQ(boxed_answer("\\boxed{\\frac{1}{2}}"), "\\frac{1}{2}");
  // A box cut off by the length limit is passed over for an earlier whole one.
  EXPECT_EQ(boxed_answer("\\boxed{7} and then \\boxed{8"), "7");
  EXPECT_FALSE(boxed_answer("no box {here}"));
}

TEST(AnswerExtraction, MarkerTakesTheRestOfTheLineAfterTheLastMarker) {
  EXPECT_EQ(marked_answer("48/2 = 24\n#### 24"), "24");
  EXPECT_EQ(marked_answer("#### 3\nno, #### 1,234 \nthe end"), "1,234");
  EXPECT_FALSE(marked_answer("24"));
}

TEST(AnswerExtraction, LastNumberTakesSignsCommasAndFractions) {
  EXPECT_EQ(last_number("12 + 3 = 15."), "15");
  EXPECT_EQ(last_number("it is -7 degrees"), "-7");
  EXPECT_EQ(last_number("about 1,234.5 apples"), "1,234.5");
  EXPECT_FALSE(last_number("no digits"));
}

TEST(AnswerComparison, NumbersCompareByValueAndTextsAfterTrimming) {
  for (const char* same : {"1234", "1,234", "1234.0", "1234.", "$1234", " 01234 ", "1,234.00"})
    EXPECT_TRUE(answers_equal(same, "1234")) << same;
  for (const char* other : {"12,34", "1234.5", "123", "-1234", "1,2345", "1234a"})
    EXPECT_FALSE(answers_equal(other, "1234")) << other;
  EXPECT_TRUE(answers_equal("-0", "0"));
  EXPECT_TRUE(answers_equal(" x = 2 ", "x = 2"));
  EXPECT_FALSE(answers_equal("x=2", "x = 2"));
}

TEST(AnswerMatch, ScoresAgainstTheRowsColumnInEitherForm) {
  AnswerMatchReward marker(AnswerExtraction::marker, "answer");
  const nlohmann::json gsm8k = {{"answer", "Half of 48 is 24.\n#### 24"}};
  const nlohmann::json number = {{"answer", 24}};
  EXPECT_EQ(score(marker, {sample("so #### 24", gsm8k), sample("\\boxed{24.0}", number),
                           sample("24", number), sample("#### 25", number)}),
            (std::vector<double>{1, 1, 0, 0}));
  AnswerMatchReward last(AnswerExtraction::last_number, "solution");
  EXPECT_EQ(score(last, {sample("3 + 21 = 24", {{"solution", "24"}})}), std::vector<double>{1});
  // A row whose answer gives nothing is not scored (TRL's None).
  EXPECT_TRUE(std::isnan(score(last, {sample("24", {{"solution", ""}})})[0]));
  expect_error(
      [&] {
        score(last, {sample("24", {{"answer", "24"}})});
      },
      "[reward last_number]", "no column 'solution' (its columns: answer)");
}

TEST(FormatReward, MatchesFromTheStartAcrossLines) {
  FormatReward f("<think>.*</think>");
  EXPECT_EQ(score(f, {sample("<think>a\nb</think>\n42"), sample(" <think>x</think>"),
                      sample("<think>open")}),
            (std::vector<double>{1, 0, 0}));
  FormatReward whole("<think>.*</think>$");
  EXPECT_EQ(score(whole, {sample("<think>a</think> tail")}), std::vector<double>{0});
  expect_error([] { FormatReward bad("(a)\\1"); }, "[reward format] '(a)\\1'");
}

// TRL's get_soft_overlong_punishment docstring: L_max 100, L_cache 20, 90 tokens -> -0.5.
TEST(LengthPenalty, IsDapoSoftOverlongPunishment) {
  LengthPenalty f(100, 20);
  auto with = [](size_t tokens, bool truncated) {
    RewardSample s;
    s.completion_ids.assign(tokens, 1);
    s.truncated = truncated;
    return s;
  };
  // A stopped completion counts its stop token: 89 tokens + eos are TRL's 90.
  EXPECT_EQ(score(f, {with(89, false), with(79, false), with(80, false), with(100, true)}),
            (std::vector<double>{-0.5, 0, -0.05, -1}));
  expect_error([] { LengthPenalty(100, 101); }, "[reward length_penalty]", "[0, 100]");
}

TEST(CombineRewards, IsTrlsWeightedNansumAndUnscorableRowsStayNan) {
  const double nan = std::nan("");
  const auto combined = combine_rewards({{1, nan, nan, 0.1}, {0.5, 1, nan, 0.2}}, {1, 0.5});
  EXPECT_EQ(combined[0], 1.25);
  EXPECT_EQ(combined[1], 0.5);
  EXPECT_TRUE(std::isnan(combined[2]));
  EXPECT_EQ(combined[3], double(0.1f * 1.0f + 0.2f * 0.5f));  // float32, as TRL's tensors
}

// A function written in a program that answers the wrong number of rewards, or an infinite one.
class Broken : public RewardFunction {
 public:
  explicit Broken(std::vector<double> answer) : answer_(std::move(answer)) {}
  std::string name() const override { return "broken"; }
  std::vector<double> score(std::span<const RewardSample>) override { return answer_; }

 private:
  std::vector<double> answer_;
};

TEST(ScoreRewards, RunsEveryFunctionAndChecksWhatItAnswers) {
  RewardFunctions functions;
  functions.push_back(std::make_unique<AnswerMatchReward>(AnswerExtraction::last_number, "answer"));
  functions.push_back(std::make_unique<FormatReward>("\\d+$"));
  const std::vector<RewardSample> samples = {sample("7", {{"answer", 7}}),
                                             sample("it is 7.", {{"answer", 8}})};
  const RewardScores scores = score_rewards(functions, samples, {1, 0.5});
  EXPECT_EQ(scores.names, (std::vector<std::string>{"last_number", "format"}));
  EXPECT_EQ(scores.per_function, (std::vector<std::vector<double>>{{1, 0}, {1, 0}}));
  EXPECT_EQ(scores.total, (std::vector<double>{1.5, 0}));
  functions.push_back(std::make_unique<Broken>(std::vector<double>{1}));
  expect_error(
      [&] {
        score_rewards(functions, samples, {1, 1, 1});
      },
      "[reward broken] answered 1 rewards for 2 completions");
  functions.back() = std::make_unique<Broken>(std::vector<double>{1, INFINITY});
  expect_error(
      [&] {
        score_rewards(functions, samples, {1, 1, 1});
      },
      "[reward broken] the reward of completion 1 is infinite");
}

TEST(RewardWeights, OneFiniteWeightPerFunction) {
  EXPECT_EQ(parse_reward_weights("", {"a", "b"}), (std::vector<double>{1, 1}));
  EXPECT_EQ(parse_reward_weights("1, 0.25", {"a", "b"}), (std::vector<double>{1, 0.25}));
  expect_error(
      [] {
        parse_reward_weights("1", {"exact_match", "command"});
      },
      "[grpo] --reward_weights has 1 weights for 2 reward functions", "(exact_match, command)");
  expect_error(
      [] {
        parse_reward_weights("1,x", {"a", "b"});
      },
      "[grpo] --reward_weights", "'x' is not a finite number");
}

TEST(RewardFuncs, ListSplitsAtCommasOutsideBracketsAndEscapes) {
  const auto entries = split_reward_funcs("exact_match,format:\\d{1,3}(,\\d{3})*$,format:a\\,b");
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0], (std::pair<std::string, std::string>{"exact_match", ""}));
  EXPECT_EQ(entries[1].second, "\\d{1,3}(,\\d{3})*$");
  EXPECT_EQ(entries[2].second, "a\\,b");
  auto functions =
      make_reward_functions("exact_match,format:\\d{1,3}(,\\d{3})*$,format:a\\,b,length_penalty:4",
                            {.max_completion_length = 8});
  ASSERT_EQ(functions.size(), 4u);
  EXPECT_EQ(functions[0]->name(), "exact_match");
  EXPECT_EQ(score(*functions[1], {sample("1,234"), sample("1234")}), (std::vector<double>{1, 0}));
  EXPECT_EQ(score(*functions[2], {sample("a,b")}), std::vector<double>{1});
  EXPECT_EQ(functions[3]->name(), "length_penalty");
}

TEST(RewardFuncs, BadListsAreNamed) {
  expect_error([] { make_reward_functions("exact_match,bleu", {}); },
               "[grpo] --reward_funcs: unknown reward function 'bleu'",
               "exact_match, last_number, format, length_penalty");
  expect_error([] { make_reward_functions("format", {}); }, "[grpo] --reward_funcs: format needs",
               "format:REGEX");
  expect_error([] { make_reward_functions("exact_match,,format:x", {}); }, "[grpo] --reward_funcs",
               "entry 2 is empty");
  expect_error([] { make_reward_functions("", {}); }, "[grpo] no reward function");
  for (const RewardFuncRow& row : reward_func_table())
    EXPECT_NE(reward_funcs_help().find(row.name + ":" + row.argument), std::string::npos);
}

}  // namespace
}  // namespace fitgrad::train::rewards
