// ObjectiveMetrics and TrainObjective's defaults (objective.h).
#include "train/objectives/objective.h"

namespace fitgrad::train {

void ObjectiveMetrics::add(const std::string& name, double sum, double count) {
  auto& [s, n] = sums_[name];
  s += sum;
  n += count;
}

void ObjectiveMetrics::merge(const ObjectiveMetrics& other) {
  for (const auto& [name, v] : other.sums_) add(name, v.first, v.second);
}

std::pair<double, double> ObjectiveMetrics::at(const std::string& name) const {
  const auto it = sums_.find(name);
  return it == sums_.end() ? std::pair<double, double>{0.0, 0.0} : it->second;
}

std::map<std::string, double> ObjectiveMetrics::means() const {
  std::map<std::string, double> out;
  for (const auto& [name, v] : sums_)
    if (v.second > 0) out[name] = v.first / v.second;
  return out;
}

MicroBatches TrainObjective::step_batches(nn::CausalLM&, int64_t, int64_t, MicroBatches records) {
  return records;
}

void TrainObjective::plan_batch(MicroBatch&, int64_t) const {}

std::string TrainObjective::eval_summary(const ObjectiveMetrics&) const { return ""; }

}  // namespace fitgrad::train
