// The causal language model's objective: the mean cross-entropy of each next token of the
// micro-batch's rows (packed rows attend within their examples), as transformers'
// LlamaForCausalLM computes it with labels. The step's default, and `--objective sft` on text.
#pragma once

#include <memory>

#include "train/objectives/objective.h"

namespace fitgrad::train {

class CausalLmObjective : public TrainObjective {
 public:
  std::string name() const override { return "causal_lm"; }
  bool is_cross_entropy() const override { return true; }
  Tensor loss(nn::CausalLM& model, const MicroBatch& batch, const LossContext& context) override;
};

}  // namespace fitgrad::train
