// What a GRPO reward is: a function that scores a batch of completions, one number each, and
// how the numbers of several functions become one reward per completion (--reward_weights).
// The built-in functions (answer_match.h, format_reward.h, length_penalty.h), a user's
// program (reward_command.h) and any function a program embedding the library writes all
// implement RewardFunction; reward_funcs.h builds the list a run names.
//
// Note [Rewards as TRL scores them]
// As TRL's GRPOTrainer (_calculate_rewards and _generate_and_score_completions, TRL
// 1.16.0): every function scores every completion; a function that has nothing to say for
// one answers NaN (TRL's None: TRL's accuracy_reward does so when the row's solution does not
// parse). The rewards are held in float32 (TRL's rewards_per_func tensor), and the reward of a
// completion is the weighted sum over the functions with NaN terms left out (torch.nansum of
// reward * weight, in float32, functions in order). A completion that every function left NaN
// is unscorable: its reward is NaN, which the advantage computation leaves out of its group's
// statistics and whose advantage is then 0 (TRL's unscorable_mask). Without --reward_weights
// every weight is 1; with it, there is exactly one weight per function, in the order the
// functions are listed (--reward_funcs, then --reward_command), else an error.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

namespace fitgrad::train::rewards {

// One completion to score.
struct RewardSample {
  // The prompt's text: the row's prompt when it is text, else its rendering with the chat
  // template (what the model generated after).
  std::string prompt;
  std::string completion;               // the completion's text, without the stop token
  std::vector<int32_t> completion_ids;  // its token ids, without the stop token
  bool truncated = false;               // it ran to max_completion_length without a stop
  // The row's columns (a JSON object): the answer a function checks against, or anything a
  // user's program reads.
  nlohmann::json row = nlohmann::json::object();
};

class RewardFunction {
 public:
  virtual ~RewardFunction() = default;
  // The name in metrics ("rewards/<name>/mean") and in errors.
  virtual std::string name() const = 0;
  // One reward per sample, in order; NaN: no reward for that sample (Note [Rewards as TRL
  // scores them]). Throws fitgrad::Error on bad input (a missing column, a failed program).
  virtual std::vector<double> score(std::span<const RewardSample> samples) = 0;
};

using RewardFunctions = std::vector<std::unique_ptr<RewardFunction>>;

// The weights of --reward_weights: "" gives one weight 1 per function; else comma-separated
// finite numbers, exactly one per function (`names`, for the error), as TRL requires.
std::vector<double> parse_reward_weights(const std::string& text,
                                         const std::vector<std::string>& names);

// Every function's rewards of `samples` and their weighted combination.
struct RewardScores {
  std::vector<std::string> names;                 // per function, as name() gives it
  std::vector<std::vector<double>> per_function;  // [function][sample], NaN: no reward
  std::vector<double> total;                      // combine_rewards(per_function, weights)
};

// Runs each function on `samples` in order and combines their rewards with `weights` (one per
// function). Throws "[reward <name>] ..." when a function answers another number of rewards
// than samples, or an infinite one.
RewardScores score_rewards(const RewardFunctions& functions, std::span<const RewardSample> samples,
                           const std::vector<double>& weights);

// The reward of each completion (Note [Rewards as TRL scores them]): per_function[f][i] is
// function f's reward of completion i; weights has one entry per function. The result is
// float32 arithmetic widened to double, NaN for an unscorable completion.
std::vector<double> combine_rewards(const std::vector<std::vector<double>>& per_function,
                                    const std::vector<double>& weights);

}  // namespace fitgrad::train::rewards
