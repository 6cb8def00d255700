// The objectives of preference pairs, DPO (dpo.h) and ORPO (orpo.h): what they share. Each
// training example is a pair {prompt, chosen, rejected} laid out as two answers (Note
// [Preference steps] in train/preference_loss.h, whose pair losses they compute), and each
// logs TRL's statistics (DPOTrainer's, ORPOTrainer's): rewards/chosen, rewards/rejected,
// rewards/accuracies, rewards/margins, logps/chosen, logps/rejected as means over the pairs,
// and ORPO's nll_loss (a mean over micro-batches), log_odds_ratio and log_odds_chosen.
#pragma once

#include <memory>

#include "train/objectives/objective.h"
#include "train/preference_loss.h"

namespace fitgrad::train {

class PairObjective : public TrainObjective {
 public:
  explicit PairObjective(const PreferenceConfig& config) : config_(config) {}
  std::string name() const override;
  ObjectiveData data() const override { return ObjectiveData::pairs; }
  ObjectiveReference reference() const override;
  Tensor loss(nn::CausalLM& model, const MicroBatch& batch, const LossContext& context) override;
  std::string eval_summary(const ObjectiveMetrics& metrics) const override;

 private:
  PreferenceConfig config_;
};

// TRL's named statistics of `stats` added to `metrics` (sums and their counts).
void add_preference_metrics(ObjectiveMetrics& metrics, const PreferenceStats& stats,
                            Objective objective);
// The pair statistics back from the metrics (TrainStep::take_preference_stats).
PreferenceStats preference_stats_of(const ObjectiveMetrics& metrics);

}  // namespace fitgrad::train
