// The summary lines of a run (train_summary.h).
#include "train/train_summary.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string>

#include "nn/int8_linear.h"
#include "optim/factory.h"
#include "optim/galore.h"
#include "optim/state_spec.h"
#include "optim/target_modules.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/memory/bytes.h"

namespace fitgrad::train {
namespace {

// APOLLO accepts a rank above a projected weight's smaller side, as the reference does, though
// that weight's state then outgrows AdamW's: the run says so, naming the first such weight.
void note_apollo_rank(TrainRun& r) {
  const optim::ApolloOptions o =
      optim::apollo_options(r.a.optim, {r.a.optim_args, r.a.optim_target_modules, r.a.seed});
  int64_t over = 0;
  std::string first;
  for (const optim::ParamGroup& group : r.optimizer->groups())
    for (const auto& [name, p] : group.params) {
      if (p.dim() != 2 || !optim::is_target_module(o.target_modules, name, p)) continue;
      if (o.rank <= std::min(p.size(0), p.size(1))) continue;
      if (over++ == 0) first = fmt::format("'{}' ({} x {})", name, p.size(0), p.size(1));
    }
  if (over > 0)
    r.out << fmt::format(
        "note: {}'s rank {} is above the smaller side of {} projected weight(s), {} the first: "
        "their state outgrows AdamW's; --optim_args rank=N with a smaller N saves memory\n",
        r.a.optim, o.rank, over, first);
}

// True when `inner` is `outer` or lies inside it (both made absolute and normal).

}  // namespace

void print_summary(TrainRun& r, int64_t warmup) {
  const TrainArgs& a = r.a;
  const nn::CausalLM& model = *r.lm.model;
  // An int8 layer's scales and zeros are parameters that are no weights (Note [Int8 weights
  // as parameters]).
  int64_t int8 = 0, int8_bytes = 0, companions = 0;
  for (const auto& [path, m] : model.named_modules())
    if (const auto* q = dynamic_cast<const nn::Int8Linear*>(m)) {
      int8 += q->quantized().numel();
      int8_bytes += q->quantized().nbytes();
      companions += q->quantized().scales.numel() + q->quantized().zeros.numel();
    }
  const int64_t weights = model.num_parameters() - companions;
  r.out << fmt::format("model: {}\nparameters: {} ({} of f32 weights)\n", r.lm.description, weights,
                       format_bytes(weights * 4));
  if (int8 > 0)
    r.out << fmt::format(
        "int8 weights: {} of them in {} ({:.3f} bytes each with scales and "
        "zeros, groups of {})\n",
        int8, format_bytes(int8_bytes), double(int8_bytes) / double(int8), a.weight_group_size);
  if (r.sft) r.out << r.sft->summary << "\n";
  // Which libraries the step runs on (issue 60).
  if (const backend::BackendRules& rules = backend::backend_rules(r.device.type); rules.describe)
    r.out << rules.describe() << "\n";
  if (r.metrics && !r.metrics->tensorboard_file().empty())
    r.out << "tensorboard: " << r.metrics->tensorboard_file() << "\n";
  if (r.dataset)
    r.out << fmt::format("data: {} -> {} tokens ({}; {} train, {} validation), tokenizer {}\n",
                         a.data, r.dataset->num_tokens(),
                         r.dataset->built() ? "tokenized now" : "from the cache",
                         r.dataset->train().size(), r.dataset->val().size(), r.lm.tokenizer_id);
  if (!r.grpo_prompts.empty())  // Note [GRPO runs] in train_grpo.cpp
    r.out << fmt::format(
        "data: {} -> {} prompts; a step samples {} completions of each of {} prompts, at most {} "
        "tokens each; no evaluation\n",
        a.data, r.grpo_prompts.size(), a.num_generations,
        a.per_device_train_batch_size * a.gradient_accumulation_steps / a.num_generations,
        a.max_completion_length);
  if (r.dry_run)
    r.out << (r.dataset || r.sft
                  ? "dry run on meta: the data sizes the run but no batch is read, no "
                    "losses exist and no checkpoint is written; the memory record is the "
                    "real run's\n"
                  : "dry run on meta: no data is read, no losses exist and no checkpoint "
                    "is written; the memory record is the real run's when its validation "
                    "split holds --eval_max_batches batches (--data sizes it)\n");
  // transformers' Adafactor without a learning rate sets its own relative step per
  // parameter; the schedule's lr (still logged) does not reach it.
  const std::string lr =
      a.optim == "adafactor_hf" && !a.learning_rate_given
          ? std::string("from Adafactor's relative step (min(1e-2, 1/sqrt(t)) x rms(p))")
          : fmt::format("{} {} with {} warmup steps", a.learning_rate, a.lr_scheduler_type, warmup);
  r.out << fmt::format(
      "steps: {} (batch {} x {} tokens x {} accumulation; {} batches per epoch), optimizer {}, "
      "lr {}\n",
      r.total, a.per_device_train_batch_size, a.seq_len, a.gradient_accumulation_steps,
      r.dataset || r.sft || !r.grpo_prompts.empty() ? std::to_string(r.batches_per_epoch)
                                                    : std::string("no"),
      a.optim, lr);
  int64_t state_elements = 0, state = 0;
  for (size_t i = 0; i < r.optimizer->num_params(); ++i)
    for (const optim::StateSpec& spec : r.optimizer->state_specs(i)) {
      state_elements += numel(spec.shape);
      state += optim::state_bytes({spec});
    }
  if (const auto* g = dynamic_cast<const optim::GaLore*>(r.optimizer.get())) {
    int64_t projected = 0, weights = 0;
    for (size_t i = 0; i < g->num_params(); ++i) projected += g->projected(i);
    for (const optim::ParamGroup& group : g->groups()) weights += int64_t(group.params.size());
    const optim::GaLoreOptions& o = g->galore_options();
    r.out << fmt::format(
        "GaLore: {} of {} parameters projected ({}), rank {}, SVD every {} steps, scale {}\n",
        projected, weights, fmt::join(o.target_modules, ","), o.rank, o.update_proj_gap, o.scale);
  }
  r.out << fmt::format(
      "optimizer state ({} declared): {} elements, {} = {:.3f} bytes per trained parameter; the "
      "ledger's figure follows the first step\n",
      r.optimizer->name(), state_elements, format_bytes(state),
      double(state) / double(r.optimized_parameters()));
  if (a.optim.starts_with("apollo")) note_apollo_rank(r);
  r.out << std::flush;
}

}  // namespace fitgrad::train
