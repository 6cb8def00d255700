// Odds Ratio Preference Optimization (`--objective orpo`, TRL's ORPOTrainer; Hong et al.
// 2024): the chosen answers' NLL minus --beta (ORPO's lambda) times the log-sigmoid of the
// answers' log odds ratio (train/preference_loss.h), on preference pairs, without a reference.
#pragma once

#include <memory>

#include "train/objectives/objective.h"
#include "train/train_args.h"

namespace fitgrad::train {

std::unique_ptr<TrainObjective> make_orpo(const TrainArgs& a);

}  // namespace fitgrad::train
