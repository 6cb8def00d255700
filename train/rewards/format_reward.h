// The built-in format reward: 1 when the completion has the form a regular expression
// describes, else 0 (TRL's think_format_reward and the format rewards of its GRPO examples).
//
// Note [Format patterns]
// The pattern matches as Python's re.match(pattern, completion, re.DOTALL) does in TRL's
// examples: anchored at the start of the completion, not at its end (end the pattern with
// '$' to require that), '.' matching newlines too. It runs on RE2 (Note [Patterns in linear
// time] in io/full_match.h), so a pattern with backreferences or lookaround is refused when it
// is read; '^' and '$' are the text's ends (not each line's).
#pragma once

#include <memory>
#include <string>

#include "train/rewards/reward_function.h"

namespace re2 {
class RE2;
}

namespace fitgrad::train::rewards {

class FormatReward : public RewardFunction {
 public:
  // Throws "[reward format] ..." with RE2's reason for a pattern it cannot run.
  explicit FormatReward(const std::string& pattern);
  std::string name() const override { return "format"; }
  std::vector<double> score(std::span<const RewardSample> samples) override;

 private:
  std::shared_ptr<const re2::RE2> re_;
};

}  // namespace fitgrad::train::rewards
