// GRPO's generation batch (grpo_generation.h, Note [GRPO generation batch]).
#include "train/objectives/grpo_generation.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "tensor/error.h"
#include "train/objectives/grpo.h"
#include "train/objectives/grpo_rows.h"

namespace fitgrad::train {
namespace {

// TRL's completions/* statistics: the trained length (the stop token included) of each
// completion, and the share that ran to the length limit.
void add_length_metrics(ObjectiveMetrics& metrics, const std::vector<Completion>& completions) {
  double sum = 0, shortest = 0, longest = 0, clipped = 0;
  for (size_t i = 0; i < completions.size(); ++i) {
    const Completion& c = completions[i];
    const double n = double(c.ids.size() + (c.stop >= 0 ? 1 : 0));
    sum += n;
    shortest = i == 0 ? n : std::min(shortest, n);
    longest = i == 0 ? n : std::max(longest, n);
    clipped += c.truncated ? 1 : 0;
  }
  const auto count = double(completions.size());
  metrics.add("completions/mean_length", sum / count);
  metrics.add("completions/min_length", shortest);
  metrics.add("completions/max_length", longest);
  metrics.add("completions/clipped_ratio", clipped / count);
}

}  // namespace

GrpoGeneration grpo_generation(nn::CausalLM& model, const data::Tokenizer* tokenizer,
                               const std::vector<GrpoPrompt>& prompts,
                               const GrpoGenerationSettings& s,
                               const rewards::RewardFunctions& functions, int64_t micro_batches,
                               Generator& generator, nn::CausalLM* reference_model) {
  const GrpoConfig& cfg = s.config;
  const int64_t g = cfg.num_generations;
  const auto total = int64_t(prompts.size()) * g;
  FG_CHECK(!prompts.empty() && micro_batches >= 1 && total % micro_batches == 0,
           "[grpo] {} prompts x --num_generations {} = {} completions do not split into {} "
           "micro-batches of equal size: make the prompts per step x --num_generations a "
           "multiple of --gradient_accumulation_steps",
           prompts.size(), g, total, micro_batches);
  FG_CHECK(!functions.empty(),
           "[grpo] no reward function: give --reward_funcs or "
           "--reward_command");
  FG_CHECK(s.num_iterations >= 1, "[grpo] --num_iterations {} (need >= 1)", s.num_iterations);
  GroupGenerationOptions gen = s.generation;
  gen.num_generations = g;
  gen.max_completion_length = cfg.max_completion_length;

  GrpoGeneration out;
  std::vector<std::vector<int32_t>> prompt_ids;
  for (const GrpoPrompt& p : prompts) prompt_ids.push_back(p.ids);
  out.completions = generate_groups(model, tokenizer, prompt_ids, gen, generator);

  std::vector<rewards::RewardSample> samples(static_cast<size_t>(total));
  for (size_t i = 0; i < samples.size(); ++i) {
    const Completion& c = out.completions[i];
    const GrpoPrompt& p = prompts[size_t(c.prompt)];
    samples[i] = {p.text, c.text, c.ids, c.truncated, p.row};
  }
  std::vector<double> weights = cfg.reward_weights;
  if (weights.empty()) weights.assign(functions.size(), 1.0);
  const rewards::RewardScores scores = rewards::score_rewards(functions, samples, weights);
  out.rewards = scores.total;
  const auto k = int64_t(functions.size());
  std::vector<double> per_completion(size_t(total * k));  // (B, K)
  for (int64_t i = 0; i < total; ++i)
    for (int64_t f = 0; f < k; ++f)
      per_completion[size_t(i * k + f)] = scores.per_function[size_t(f)][size_t(i)];
  const GrpoAdvantages adv = grpo_advantages(cfg, per_completion, k);
  out.metrics.add("reward", adv.reward_mean);
  out.metrics.add("reward_std", adv.reward_std);
  out.metrics.add("frac_reward_zero_std", adv.frac_reward_zero_std);
  for (int64_t f = 0; f < k; ++f) {
    out.metrics.add(fmt::format("rewards/{}/mean", scores.names[size_t(f)]),
                    adv.function_mean[size_t(f)]);
    out.metrics.add(fmt::format("rewards/{}/std", scores.names[size_t(f)]),
                    adv.function_std[size_t(f)]);
  }
  add_length_metrics(out.metrics, out.completions);

  const auto params = model.named_parameters();
  FG_CHECK(!params.empty(), "[grpo] the model has no parameters");
  const Device device = params.front().second.device();
  const int64_t rows = total / micro_batches;
  std::vector<GrpoRows> laid(static_cast<size_t>(micro_batches));
  double trained_tokens = 0;  // dapo's num_items_in_batch: the generation batch's
  for (int64_t m = 0; m < micro_batches; ++m) {
    std::vector<std::vector<int32_t>> ps, cs;
    std::vector<bool> truncated;
    for (int64_t i = m * rows; i < (m + 1) * rows; ++i) {
      const Completion& c = out.completions[size_t(i)];
      ps.push_back(prompt_ids[size_t(c.prompt)]);
      cs.push_back(c.ids);
      if (c.stop >= 0) cs.back().push_back(c.stop);
      truncated.push_back(c.truncated);
    }
    laid[size_t(m)] = grpo_rows(ps, cs, truncated, cfg, s.pad_id, device);
    for (const double v : laid[size_t(m)].mask) trained_tokens += v;
  }
  for (int64_t m = 0; m < micro_batches; ++m) {
    GrpoRows& r = laid[size_t(m)];
    auto grpo = std::make_shared<GrpoMicroBatch>();
    grpo->advantages.assign(adv.advantages.begin() + ptrdiff_t(m * rows),
                            adv.advantages.begin() + ptrdiff_t((m + 1) * rows));
    if (s.num_iterations > 1) grpo->old_logp = grpo_host_logprobs(model, r, s.temperature, false);
    if (cfg.beta != 0)
      grpo->ref_logp = grpo_host_logprobs(model, r, s.temperature, true, reference_model);
    grpo->mask = std::move(r.mask);
    grpo->num_items_in_batch = trained_tokens;
    grpo->steps_per_generation = micro_batches;
    MicroBatch batch;
    batch.ids = r.ids;
    batch.targets = r.targets;
    for (const double v : grpo->mask) batch.trained_targets += v != 0 ? 1 : 0;
    batch.grpo = std::move(grpo);
    out.micro_batches.push_back(std::move(batch));
  }
  return out;
}

}  // namespace fitgrad::train
