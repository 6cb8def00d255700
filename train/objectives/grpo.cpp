// GRPO's objective, the loss side (grpo.h).
#include "train/objectives/grpo.h"

#include <cmath>

#include "tensor/error.h"
#include "tensor/memory/scope.h"

namespace fitgrad::train {

GrpoInputs GrpoMicroBatch::inputs(int64_t rows, int64_t length,
                                  std::span<const double> entropy) const {
  GrpoInputs in;
  in.rows = rows;
  in.cols = length;
  in.old_logp = old_logp;
  in.ref_logp = ref_logp;
  in.mask = mask;
  in.advantages = advantages;
  in.entropy = entropy;
  in.num_items_in_batch = num_items_in_batch;
  in.steps_per_generation = steps_per_generation;
  return in;
}

GrpoObjective::GrpoObjective(const GrpoConfig& config, double temperature)
    : config_(config), temperature_(temperature) {
  FG_CHECK(temperature > 0, "[grpo] --temperature {} (need > 0)", temperature);
  FG_CHECK(config.epsilon >= 0 && config.epsilon_high.value_or(0) >= 0 && config.beta >= 0,
           "[grpo] --epsilon {}, --epsilon_high {} and --beta {} must not be negative",
           config.epsilon, config.epsilon_high.value_or(config.epsilon), config.beta);
}

ObjectiveReference GrpoObjective::reference() const {
  return config_.beta != 0 ? ObjectiveReference::model : ObjectiveReference::none;
}

void add_grpo_metrics(ObjectiveMetrics& metrics, const GrpoStats& s) {
  const std::pair<const char*, double> values[] = {{"clip_ratio/low_mean", s.clip_low_mean},
                                                   {"clip_ratio/high_mean", s.clip_high_mean},
                                                   {"clip_ratio/region_mean", s.clip_region_mean},
                                                   {"clip_ratio/low_min", s.clip_low_min},
                                                   {"clip_ratio/high_max", s.clip_high_max},
                                                   {"kl", s.kl},
                                                   {"entropy", s.entropy}};
  for (const auto& [name, value] : values)
    if (!std::isnan(value)) metrics.add(name, value);
}

Tensor GrpoObjective::loss(nn::CausalLM& model, const MicroBatch& batch,
                           const LossContext& context) {
  FG_CHECK(batch.grpo, "[grpo] a micro-batch without its completions' GRPO data");
  const int64_t rows = batch.ids.size(0), length = batch.ids.size(1);
  Tensor entropy;
  const Tensor logp = model.token_logprobs(batch.ids, batch.targets, temperature_, &entropy);
  const LabelScope label("loss");
  std::vector<double> entropies;  // (B L); read with logp (Note [GRPO's terms on the host])
  if (entropy.device().has_bytes()) entropies = entropy.to_vector<double>();
  GrpoStats stats;
  const Tensor loss = grpo_loss(logp, batch.grpo->inputs(rows, length, entropies), config_, &stats);
  if (context.metrics && logp.device().has_bytes()) add_grpo_metrics(*context.metrics, stats);
  if (context.metrics && !pending_.empty()) {
    context.metrics->merge(pending_);
    pending_ = ObjectiveMetrics();
  }
  return loss;
}

void GrpoObjective::sample_with(GrpoSampling sampling) {
  FG_CHECK(sampling.prompts, "[grpo] sampling without a source of prompts");
  sampling.settings.config = config_;
  sampling.settings.temperature = temperature_;
  generator_.manual_seed(sampling.seed);
  sampling_.emplace(std::move(sampling));
  generation_.reset();
  generation_index_ = -1;
}

MicroBatches GrpoObjective::step_batches(nn::CausalLM& model, int64_t step, int64_t micro_batches,
                                         MicroBatches records) {
  if (!sampling_) return records;
  GrpoSampling& s = *sampling_;
  const int64_t n = step / s.settings.num_iterations;
  if (n != generation_index_) {
    generation_.reset();  // the last batch's rows go before the next batch's are made
    generation_.emplace(grpo_generation(model, s.tokenizer, s.prompts(n), s.settings, s.functions,
                                        micro_batches, generator_, s.reference_model));
    generation_index_ = n;
    pending_ = generation_->metrics;
  }
  FG_CHECK(int64_t(generation_->micro_batches.size()) == micro_batches,
           "[grpo] a generation batch of {} micro-batches for a step of {}",
           generation_->micro_batches.size(), micro_batches);
  return [this](int64_t m) { return generation_->micro_batches[size_t(m)]; };
}

void GrpoObjective::plan_batch(MicroBatch& batch, int64_t examples) const {
  FG_CHECK(batch.ids.defined() && batch.ids.size(0) == examples,
           "[grpo] the dry run's batch needs its (B, L) rows first");
  auto g = std::make_shared<GrpoMicroBatch>();
  const auto n = size_t(batch.ids.numel());
  g->advantages.assign(size_t(examples), 0.0);
  g->mask.assign(n, 1.0);
  if (config_.beta != 0) g->ref_logp.assign(n, 0.0);
  g->num_items_in_batch = double(n);
  batch.grpo = g;
}

}  // namespace fitgrad::train
