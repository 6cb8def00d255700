// parse_reward_weights and combine_rewards (reward_function.h).
#include "train/rewards/reward_function.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdlib>

#include "tensor/error.h"

namespace fitgrad::train::rewards {

std::vector<double> parse_reward_weights(const std::string& text,
                                         const std::vector<std::string>& names) {
  if (text.empty()) return std::vector<double>(names.size(), 1.0);
  std::vector<double> weights;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string word =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t first = word.find_first_not_of(" \t");
    const size_t last = word.find_last_not_of(" \t");
    const std::string w = first == std::string::npos ? "" : word.substr(first, last - first + 1);
    char* end = nullptr;
    const double value = w.empty() ? 0 : std::strtod(w.c_str(), &end);
    FG_CHECK(!w.empty() && end == w.c_str() + w.size() && std::isfinite(value),
             "[grpo] --reward_weights '{}': '{}' is not a finite number; give comma-separated "
             "numbers such as 1,0.5",
             text, w);
    weights.push_back(value);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  FG_CHECK(weights.size() == names.size(),
           "[grpo] --reward_weights has {} weights for {} reward functions ({}); give one "
           "weight per function, in the order --reward_funcs then --reward_command list them",
           weights.size(), names.size(), fmt::join(names, ", "));
  return weights;
}

std::vector<double> combine_rewards(const std::vector<std::vector<double>>& per_function,
                                    const std::vector<double>& weights) {
  FG_ASSERT(per_function.size() == weights.size() && !per_function.empty());
  const size_t n = per_function.front().size();
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    float sum = 0;
    bool scored = false;
    for (size_t f = 0; f < per_function.size(); ++f) {
      FG_ASSERT(per_function[f].size() == n);
      const float r = float(per_function[f][i]);
      if (std::isnan(r)) continue;
      scored = true;
      sum += r * float(weights[f]);
    }
    out[i] = scored ? double(sum) : std::nan("");
  }
  return out;
}

RewardScores score_rewards(const RewardFunctions& functions, std::span<const RewardSample> samples,
                           const std::vector<double>& weights) {
  FG_ASSERT(functions.size() == weights.size() && !functions.empty());
  RewardScores scores;
  for (const auto& f : functions) {
    std::vector<double> rewards = f->score(samples);
    FG_CHECK(rewards.size() == samples.size(), "[reward {}] answered {} rewards for {} completions",
             f->name(), rewards.size(), samples.size());
    for (size_t i = 0; i < rewards.size(); ++i)
      FG_CHECK(!std::isinf(rewards[i]), "[reward {}] the reward of completion {} is infinite",
               f->name(), i);
    scores.names.push_back(f->name());
    scores.per_function.push_back(std::move(rewards));
  }
  scores.total = combine_rewards(scores.per_function, weights);
  return scores;
}

}  // namespace fitgrad::train::rewards
