// The SFT objective's factory (sft.h).
#include "train/objectives/sft.h"

#include "train/train_sft.h"

namespace fitgrad::train {

std::unique_ptr<TrainObjective> make_sft(const TrainArgs& a) {
  if (!a.data.empty() && is_sft_data(a)) return std::make_unique<SftObjective>();
  return std::make_unique<CausalLmObjective>();
}

}  // namespace fitgrad::train
