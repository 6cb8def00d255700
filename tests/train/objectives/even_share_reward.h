// A reward function for GRPO tests on a model with random weights: the share of a
// completion's tokens that are even, which a policy gradient can raise within a few steps.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "train/rewards/reward_function.h"

namespace fitgrad::testing {

class EvenShare : public train::rewards::RewardFunction {
 public:
  std::string name() const override { return "even_share"; }
  std::vector<double> score(std::span<const train::rewards::RewardSample> samples) override {
    std::vector<double> out;
    for (const train::rewards::RewardSample& s : samples) {
      double even = 0;
      for (const int32_t id : s.completion_ids) even += id % 2 == 0 ? 1 : 0;
      out.push_back(s.completion_ids.empty() ? 0.0 : even / double(s.completion_ids.size()));
    }
    return out;
  }
};

}  // namespace fitgrad::testing
