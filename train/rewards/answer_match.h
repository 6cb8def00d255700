// Built-in rewards that compare a completion's final answer with the row's answer column:
// 1 when they are equal, 0 when not (or when the completion gives no answer), NaN when the
// row's answer itself gives none (TRL's accuracy_reward answers None for an unparseable
// solution). Two ways to find the completion's answer:
//   exact_match  the contents of the last \boxed{...} (braces nested), else the rest of the
//                line after the last "####" (GSM8K's answer marker);
//   last_number  the last number in the text (lm-evaluation-harness's "flexible-extract" of
//                GSM8K), for models that do not write a marker.
// The row's answer goes through the same extraction when it holds a marker (GSM8K's answer
// column is the whole solution, ending "#### 72"), else it is the whole value (a JSON number
// or string).
//
// Note [Comparing answers]
// Two answers that both read as decimal numbers are equal when their values are: an optional
// sign, digits with optional thousands commas ("1,234", each group of three), an optional
// fraction, with a leading '$' and a trailing '.' or '%' ignored, so "1,234", "1234.0",
// "$1234" and "1234." all equal "1234"; the comparison is exact (digit strings, no floating
// point), so 0.1 + 0.2 style rounding never decides it. Otherwise the two texts must be equal
// after trimming white space.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "train/rewards/reward_function.h"

namespace fitgrad::train::rewards {

// The contents of the last balanced \boxed{...} in text; none without one.
std::optional<std::string> boxed_answer(std::string_view text);
// The rest of the line after the last "####", trimmed; none without a marker.
std::optional<std::string> marked_answer(std::string_view text);
// The last number in text (digits, optionally with a sign, thousands commas and a fraction);
// none without one.
std::optional<std::string> last_number(std::string_view text);
// Note [Comparing answers].
bool answers_equal(std::string_view a, std::string_view b);

enum class AnswerExtraction { marker, last_number };

class AnswerMatchReward : public RewardFunction {
 public:
  // `column`: the row's column holding the right answer.
  AnswerMatchReward(AnswerExtraction extraction, std::string column);
  std::string name() const override;
  std::vector<double> score(std::span<const RewardSample> samples) override;

 private:
  AnswerExtraction extraction_;
  std::string column_;
};

}  // namespace fitgrad::train::rewards
