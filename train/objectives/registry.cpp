// The registered objectives (registry.h): one line each.
#include "train/objectives/registry.h"

#include <fmt/format.h>

#include "tensor/error.h"
#include "train/objectives/dpo.h"
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

std::unique_ptr<TrainObjective> make_objective(const TrainArgs& a) {
  return objective_entry(a.objective).make(a);
}

}  // namespace fitgrad::train
