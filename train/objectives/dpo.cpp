// DPO's factory (dpo.h): the pair objective (pairs.h) with DPO's loss.
#include "train/objectives/dpo.h"

#include "train/objectives/pairs.h"

namespace fitgrad::train {

std::unique_ptr<TrainObjective> make_dpo(const TrainArgs& a) {
  return std::make_unique<PairObjective>(PreferenceConfig{
      Objective::dpo, parse_dpo_loss(a.loss_type.empty() ? "sigmoid" : a.loss_type), a.beta,
      a.label_smoothing});
}

}  // namespace fitgrad::train
