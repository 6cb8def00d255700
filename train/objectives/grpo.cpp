// GRPO's objective, the loss side (grpo.h).
#include "train/objectives/grpo.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>

#include "tensor/error.h"
#include "tensor/memory/scope.h"
#include "train/rewards/reward_funcs.h"

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
    prompts_ = s.prompts(n);
    // Note [GRPO steps]: batch n's draws start where the whole run's would.
    generator_.set_state(
        {s.seed, uint64_t(n) * uint64_t(prompts_.size()) * uint64_t(config_.num_generations) *
                     uint64_t(config_.max_completion_length)});
    generation_.emplace(grpo_generation(model, s.tokenizer, prompts_, s.settings, s.functions,
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

namespace {

// A --flag's whole text as a finite number, or an error naming it.
double flag_number(const char* flag, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  FG_CHECK(!text.empty() && *end == '\0' && std::isfinite(v),
           "[grpo] --{} '{}': not a finite number", flag, text);
  return v;
}

}  // namespace

GrpoConfig grpo_config(const TrainArgs& a) {
  GrpoConfig c;
  const int64_t g = a.num_generations;
  const int64_t step = a.per_device_train_batch_size * a.gradient_accumulation_steps;
  FG_CHECK(g >= 2 && g <= (int64_t(1) << 20),
           "[grpo] --num_generations {}: GRPO's advantage compares each completion with the "
           "others of its prompt's group, so a group needs at least 2",
           g);
  FG_CHECK(step % g == 0,
           "[grpo] --num_generations {} does not divide the {} completions of a step "
           "(--per_device_train_batch_size {} x --gradient_accumulation_steps {}): each prompt's "
           "group must be whole in a step",
           g, step, a.per_device_train_batch_size, a.gradient_accumulation_steps);
  FG_CHECK(a.generation_batch_size >= 0 && a.generation_batch_size % g == 0,
           "[grpo] --generation_batch_size {} must be a multiple of --num_generations {} (0: a "
           "step's completions)",
           a.generation_batch_size, g);
  FG_CHECK(a.max_completion_length >= 1 && a.max_completion_length <= (int64_t(1) << 24),
           "[grpo] --max_completion_length must be in [1, {}], got {}", int64_t(1) << 24,
           a.max_completion_length);
  FG_CHECK(a.top_p > 0 && a.top_p <= 1, "[grpo] --top_p must be in (0, 1], got {}", a.top_p);
  FG_CHECK(a.top_k >= 0, "[grpo] --top_k must be 0 (off) or more, got {}", a.top_k);
  FG_CHECK(a.num_iterations >= 1 && a.num_iterations <= 1000000,
           "[grpo] --num_iterations must be in [1, 1000000], got {}", a.num_iterations);
  FG_CHECK(!a.reward_funcs.empty() || !a.reward_command.empty(),
           "[grpo] no reward: give --reward_funcs (built-ins such as exact_match:answer), "
           "--reward_command, or both");
  FG_CHECK(!a.precompute_ref_log_probs,
           "[grpo] --precompute_ref_log_probs computes the reference of fixed answers; GRPO's "
           "completions are sampled as it trains, and --beta's reference is computed for each "
           "generation batch");
  c.loss_type = parse_grpo_loss_type(a.loss_type.empty() ? "dapo" : a.loss_type);
  c.epsilon = a.epsilon;
  if (!a.epsilon_high.empty()) c.epsilon_high = flag_number("epsilon_high", a.epsilon_high);
  c.beta = a.beta;
  c.importance_sampling_level = parse_importance_sampling(a.importance_sampling_level);
  c.scale_rewards = parse_reward_scaling(a.scale_rewards);
  c.mask_truncated_completions = a.mask_truncated_completions;
  c.num_generations = g;
  c.max_completion_length = a.max_completion_length;
  const size_t rewards =
      (a.reward_funcs.empty() ? 0 : rewards::split_reward_funcs(a.reward_funcs).size()) +
      (a.reward_command.empty() ? 0 : 1);
  if (!a.reward_weights.empty()) {
    size_t from = 0;
    for (;;) {
      const size_t comma = a.reward_weights.find(',', from);
      c.reward_weights.push_back(
          flag_number("reward_weights", a.reward_weights.substr(from, comma - from)));
      if (comma == std::string::npos) break;
      from = comma + 1;
    }
    FG_CHECK(c.reward_weights.size() == rewards,
             "[grpo] --reward_weights has {} weights and there are {} rewards ({} of "
             "--reward_funcs{}): give one weight per reward, in that order",
             c.reward_weights.size(), rewards, rewards - (a.reward_command.empty() ? 0 : 1),
             a.reward_command.empty() ? "" : ", then --reward_command");
  }
  return c;
}

rewards::RewardFunctions grpo_reward_functions(const TrainArgs& a) {
  rewards::RewardContext context;
  context.max_completion_length = a.max_completion_length;
  return rewards::make_reward_functions(a.reward_funcs, context, a.reward_command,
                                        a.reward_timeout);
}

std::unique_ptr<TrainObjective> make_grpo(const TrainArgs& a) {
  const GrpoConfig c = grpo_config(a);
  grpo_reward_functions(a);  // an unknown name or a bad argument is refused before the run
  return std::make_unique<GrpoObjective>(c, a.temperature);
}

}  // namespace fitgrad::train
