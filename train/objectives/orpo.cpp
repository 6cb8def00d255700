// ORPO's factory (orpo.h): the pair objective (pairs.h) with ORPO's loss.
#include "train/objectives/orpo.h"

#include <fmt/format.h>

#include "tensor/error.h"
#include "train/objectives/pairs.h"

namespace fitgrad::train {

std::unique_ptr<TrainObjective> make_orpo(const TrainArgs& a) {
  FG_CHECK(a.loss_type.empty(),
           "[train] --loss_type {} chooses DPO's or KTO's loss; --objective orpo has one loss: "
           "leave it out",
           a.loss_type);
  return std::make_unique<PairObjective>(
      PreferenceConfig{Objective::orpo, DpoLoss::sigmoid, a.beta, 0.0});
}

}  // namespace fitgrad::train
