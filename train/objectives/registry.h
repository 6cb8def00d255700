// The objectives `fitgrad train --objective NAME` can run, one registration line each
// (registry.cpp; Note [Adding an objective] in objective.h): the flag's accepted values and
// help, the records the data layer reads for each, and the flags only one of them reads.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "train/objectives/objective.h"
#include "train/train_args.h"

namespace fitgrad::train {

// --beta for one objective: its default (TRL's config's) and whether 0 is allowed (GRPO's 0
// turns the reference off; DPO's, ORPO's and KTO's losses need a positive one).
struct BetaRule {
  double fallback = 0.1;
  bool zero = false;
};

struct ObjectiveEntry {
  std::string name;  // --objective's value
  std::string help;  // what it learns from which records, for --objective's help
  ObjectiveData data;
  std::function<std::unique_ptr<TrainObjective>(const TrainArgs&)> make;
  std::vector<std::string> flags = {};  // flags only this objective reads (without --)
  BetaRule beta = {};
};

// Every registered objective, in --help order.
const std::vector<ObjectiveEntry>& objectives();
// The entry named `name`; an unknown name throws fitgrad::Error naming the registered ones.
const ObjectiveEntry& objective_entry(std::string_view name);
// --beta as --objective reads it: its BetaRule's fallback when TrainArgs::beta is at its
// default and was not given (TrainArgs::beta_given), else beta; throws "[train] --beta 0 ..."
// for an objective that needs a positive one.
double objective_beta(const TrainArgs& a);
// --objective's objective, built from the run's flags (beta as objective_beta reads it) (a flag of another objective's is
// refused by check_needs, train/train_flags.h).
std::unique_ptr<TrainObjective> make_objective(const TrainArgs& a);

}  // namespace fitgrad::train
