// The causal LM's loss (causal_lm.h).
#include "train/objectives/causal_lm.h"

namespace fitgrad::train {

Tensor CausalLmObjective::loss(nn::CausalLM& model, const MicroBatch& batch, const LossContext&) {
  return model.loss(batch.ids, batch.targets,
                    batch.packed.segments.defined() ? &batch.packed : nullptr);
}

std::shared_ptr<TrainObjective> causal_lm_objective() {
  return std::make_shared<CausalLmObjective>();
}

}  // namespace fitgrad::train
