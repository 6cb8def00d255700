// Direct Preference Optimization (`--objective dpo`, TRL's DPOTrainer; Rafailov et al. 2023)
// with the sigmoid (and conservative DPO's label smoothing), hinge and IPO losses
// (--loss_type, train/preference_loss.h), on preference pairs, against a reference: the
// model with its LoRA adapters off, a full fine-tune's frozen copy of its initial weights, or
// the values --precompute_ref_log_probs computed before training (Note [Precomputed
// reference] in train/train_reference.cpp).
#pragma once

#include <memory>

#include "train/objectives/objective.h"
#include "train/train_args.h"

namespace fitgrad::train {

std::unique_ptr<TrainObjective> make_dpo(const TrainArgs& a);

}  // namespace fitgrad::train
