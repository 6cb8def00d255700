// The pair objectives' loss and statistics (pairs.h).
#include "train/objectives/pairs.h"

#include <fmt/format.h>

#include <cmath>

namespace fitgrad::train {
namespace {

// TRL's names of the per-pair sums, and the field of each.
struct Named {
  const char* name;
  double PreferenceStats::*field;
};
constexpr Named kPerPair[] = {{"rewards/chosen", &PreferenceStats::reward_chosen},
                              {"rewards/rejected", &PreferenceStats::reward_rejected},
                              {"rewards/accuracies", &PreferenceStats::accuracy},
                              {"rewards/margins", &PreferenceStats::margin},
                              {"logps/chosen", &PreferenceStats::logps_chosen},
                              {"logps/rejected", &PreferenceStats::logps_rejected}};
constexpr Named kOrpoPerPair[] = {{"log_odds_ratio", &PreferenceStats::log_odds_ratio},
                                  {"log_odds_chosen", &PreferenceStats::log_odds_chosen}};

}  // namespace

void add_preference_metrics(ObjectiveMetrics& metrics, const PreferenceStats& st,
                            Objective objective) {
  const auto pairs = double(st.pairs);
  for (const Named& n : kPerPair) metrics.add(n.name, st.*n.field, pairs);
  if (objective != Objective::orpo) return;
  metrics.add("nll_loss", st.nll, double(st.micro_batches));
  for (const Named& n : kOrpoPerPair) metrics.add(n.name, st.*n.field, pairs);
}

PreferenceStats preference_stats_of(const ObjectiveMetrics& metrics) {
  PreferenceStats st;
  st.pairs = std::llround(metrics.at("rewards/chosen").second);
  st.micro_batches = std::llround(metrics.at("nll_loss").second);
  for (const Named& n : kPerPair) st.*n.field = metrics.at(n.name).first;
  for (const Named& n : kOrpoPerPair) st.*n.field = metrics.at(n.name).first;
  st.nll = metrics.at("nll_loss").first;
  return st;
}

std::string PairObjective::name() const {
  return config_.objective == Objective::dpo ? "dpo" : "orpo";
}

ObjectiveReference PairObjective::reference() const {
  return config_.objective == Objective::dpo ? ObjectiveReference::model : ObjectiveReference::none;
}

Tensor PairObjective::loss(nn::CausalLM& model, const MicroBatch& batch,
                           const LossContext& context) {
  PreferenceStats stats;
  const Tensor loss = preference_objective(model, batch, config_, &stats, context.reference);
  if (context.metrics && stats.pairs > 0)
    add_preference_metrics(*context.metrics, stats, config_.objective);
  return loss;
}

std::string PairObjective::eval_summary(const ObjectiveMetrics& metrics) const {
  const std::map<std::string, double> m = metrics.means();
  if (!m.contains("rewards/accuracies")) return "";
  return fmt::format("reward accuracy {:.3f}, margin {:.4f} ({} pairs)", m.at("rewards/accuracies"),
                     m.at("rewards/margins"),
                     std::llround(metrics.at("rewards/accuracies").second));
}

}  // namespace fitgrad::train
