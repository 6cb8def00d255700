// The built-in length penalty: DAPO's soft overlong punishment (Yu et al. 2025, "DAPO: An
// Open-Source LLM Reinforcement Learning System at Scale", arXiv 2503.14476, Eq. 13), as TRL's
// get_soft_overlong_punishment computes it. With L_max the maximum completion length
// (--max_completion_length) and L_cache the soft band (its argument), a completion of |y|
// tokens (its stop token not counted) gets
//     0                                  when |y| <= L_max - L_cache,
//     ((L_max - L_cache) - |y|) / L_cache  when L_max - L_cache < |y| <= L_max (0 to -1),
//     -1                                 when |y| > L_max,
// so it penalises completions that run into the length limit and never rewards short ones.
// |y| counts the stop token of a completion that stopped, as TRL's completion_ids (cut after
// the first eos, which they keep) do: RewardSample::completion_ids plus one unless truncated.
#pragma once

#include <cstdint>

#include "train/rewards/reward_function.h"

namespace fitgrad::train::rewards {

class LengthPenalty : public RewardFunction {
 public:
  // Throws "[reward length_penalty] ..." unless 0 <= soft_cache <= max_completion_length.
  LengthPenalty(int64_t max_completion_length, int64_t soft_cache);
  std::string name() const override { return "length_penalty"; }
  std::vector<double> score(std::span<const RewardSample> samples) override;

 private:
  int64_t max_length_, cache_;
};

}  // namespace fitgrad::train::rewards
