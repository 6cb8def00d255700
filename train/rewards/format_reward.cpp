// FormatReward (format_reward.h).
#include "train/rewards/format_reward.h"

#include <re2/re2.h>

#include "tensor/error.h"

namespace fitgrad::train::rewards {

FormatReward::FormatReward(const std::string& pattern) {
  RE2::Options options;
  options.set_log_errors(false);
  options.set_dot_nl(true);  // re.DOTALL
  auto re = std::make_shared<const re2::RE2>(pattern, options);
  FG_CHECK(re->ok(),
           "[reward format] '{}' is not a regular expression fitgrad reads ({}; patterns run "
           "in linear time, without backreferences or lookaround)",
           pattern, re->error());
  re_ = std::move(re);
}

std::vector<double> FormatReward::score(std::span<const RewardSample> samples) {
  std::vector<double> out;
  out.reserve(samples.size());
  for (const RewardSample& s : samples) {
    const re2::StringPiece text(s.completion.data(), s.completion.size());
    out.push_back(re_->Match(text, 0, text.size(), RE2::ANCHOR_START, nullptr, 0) ? 1.0 : 0.0);
  }
  return out;
}

}  // namespace fitgrad::train::rewards
