// LengthPenalty (length_penalty.h).
#include "train/rewards/length_penalty.h"

#include "tensor/error.h"

namespace fitgrad::train::rewards {

LengthPenalty::LengthPenalty(int64_t max_completion_length, int64_t soft_cache)
    : max_length_(max_completion_length), cache_(soft_cache) {
  FG_CHECK(max_length_ > 0,
           "[reward length_penalty] the maximum completion length must be "
           "positive, got {}",
           max_length_);
  FG_CHECK(cache_ >= 0 && cache_ <= max_length_,
           "[reward length_penalty] the soft band of {} tokens must be in [0, {}] (the maximum "
           "completion length); give length_penalty:N with N in that range",
           cache_, max_length_);
}

std::vector<double> LengthPenalty::score(std::span<const RewardSample> samples) {
  std::vector<double> out;
  out.reserve(samples.size());
  const int64_t soft_start = max_length_ - cache_;
  for (const RewardSample& s : samples) {
    const auto n = int64_t(s.completion_ids.size()) + (s.truncated ? 0 : 1);
    if (n <= soft_start)
      out.push_back(0.0);
    else if (n <= max_length_)
      out.push_back(double(soft_start - n) / double(cache_));
    else
      out.push_back(-1.0);
  }
  return out;
}

}  // namespace fitgrad::train::rewards
