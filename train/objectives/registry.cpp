// The registered objectives (registry.h): one line each.
#include "train/objectives/registry.h"

#include <fmt/format.h>

#include "tensor/error.h"
#include "train/objectives/dpo.h"
#include "train/objectives/grpo.h"
#include "train/objectives/kto.h"
#include "train/objectives/orpo.h"
#include "train/objectives/sft.h"

namespace fitgrad::train {

const std::vector<ObjectiveEntry>& objectives() {
  static const std::vector<ObjectiveEntry> all = {
      {"sft", "the cross-entropy of the trained tokens of text, instruction or chat data",
       ObjectiveData::tokens, make_sft},
      {"dpo",
       "DPO on preference pairs: prompt, chosen, rejected",
       ObjectiveData::pairs,
       make_dpo,
       {"label_smoothing"}},
      {"orpo", "ORPO on preference pairs: prompt, chosen, rejected", ObjectiveData::pairs,
       make_orpo},
      {"kto",
       "KTO on unpaired examples: prompt, completion, label",
       ObjectiveData::unpaired,
       make_kto,
       {"desirable_weight", "undesirable_weight"}},
      {"grpo",
       "GRPO on prompts it samples completions of and scores: prompt, the rewards' columns",
       ObjectiveData::prompts,
       make_grpo,
       {"num_generations", "max_completion_length", "temperature", "top_p", "top_k",
        "generation_batch_size", "reward_funcs", "reward_weights", "reward_command",
        "reward_timeout", "epsilon", "epsilon_high", "num_iterations", "scale_rewards",
        "importance_sampling_level", "mask_truncated_completions"},
       {0.0, true}},
  };
  return all;
}

const ObjectiveEntry& objective_entry(std::string_view name) {
  std::string names;
  for (const ObjectiveEntry& e : objectives()) {
    if (e.name == name) return e;
    names += (names.empty() ? "" : ", ") + e.name;
  }
  throw Error(fmt::format("[train] --objective {} is none of {}", name, names));
}

double objective_beta(const TrainArgs& a) {
  const ObjectiveEntry& e = objective_entry(a.objective);
  const double beta = a.beta_given || a.beta != TrainArgs().beta ? a.beta : e.beta.fallback;
  FG_CHECK(beta != 0 || e.beta.zero,
           "[train] --beta 0: --objective {} needs a positive beta (its loss divides by it or "
           "vanishes at 0)",
           a.objective);
  return beta;
}

std::unique_ptr<TrainObjective> make_objective(const TrainArgs& a) {
  TrainArgs read = a;
  read.beta = objective_beta(a);
  return objective_entry(a.objective).make(read);
}

}  // namespace fitgrad::train
