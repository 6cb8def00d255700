// Supervised fine-tuning (`--objective sft`, TRL's SFTTrainer): the causal LM's cross-entropy
// of the trained tokens of instruction and chat data (their loss masks, data/sft_encode.h),
// each micro-batch weighed by its share of the step's trained targets, so that the step's loss
// is the mean over every trained token of the accumulated batch (Note [Loss over trained
// targets] in train/train_step.cpp, transformers' num_items_in_batch). On text data it is
// the causal LM's objective (causal_lm.h): every window has the same number of targets.
#pragma once

#include <memory>

#include "train/objectives/causal_lm.h"
#include "train/train_args.h"

namespace fitgrad::train {

class SftObjective : public CausalLmObjective {
 public:
  std::string name() const override { return "sft"; }
  bool weighs_by_targets() const override { return true; }
};

// SftObjective for instruction data (--data of .jsonl / .json records), else the causal LM's.
std::unique_ptr<TrainObjective> make_sft(const TrainArgs& a);

}  // namespace fitgrad::train
