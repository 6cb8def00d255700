// The registered objectives (registry.h): one line each.
#include "train/objectives/registry.h"

#include <fmt/format.h>

#include "tensor/error.h"
#include "train/objectives/dpo.h"
#include "train/objectives/kto.h"
#include "train/objectives/orpo.h"
#include "train/objectives/sft.h"
#include "train/train_flags.h"

namespace fitgrad::train {

const std::vector<ObjectiveEntry>& objectives() {
  static const std::vector<ObjectiveEntry> all = {
      {"sft", "the cross-entropy of the trained tokens (text, instruction or chat data)",
       ObjectiveData::tokens, make_sft},
      {"dpo",
       "DPO on preference pairs (prompt, chosen, rejected)",
       ObjectiveData::pairs,
       make_dpo,
       {"label_smoothing"}},
      {"orpo", "ORPO on preference pairs (prompt, chosen, rejected)", ObjectiveData::pairs,
       make_orpo},
      {"kto",
       "KTO on unpaired examples (prompt, completion, label)",
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
  const ObjectiveEntry& chosen = objective_entry(a.objective);
  for (const ObjectiveEntry& e : objectives())
    for (const std::string& flag : e.flags)
      FG_CHECK(e.name == chosen.name || is_default(train_flag(flag), a),
               "[train] --{} is --objective {}'s; --objective {} does not read it: leave it out",
               flag, e.name, chosen.name);
  return chosen.make(a);
}

}  // namespace fitgrad::train
