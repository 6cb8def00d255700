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

struct ObjectiveEntry {
  std::string name;  // --objective's value
  std::string help;  // what it learns from which records, for --objective's help
  ObjectiveData data;
  std::function<std::unique_ptr<TrainObjective>(const TrainArgs&)> make;
  std::vector<std::string> flags = {};  // flags only this objective reads (without --)
};

// Every registered objective, in --help order.
const std::vector<ObjectiveEntry>& objectives();
// The entry named `name`; an unknown name throws fitgrad::Error naming the registered ones.
const ObjectiveEntry& objective_entry(std::string_view name);
// --objective's objective, built from the run's flags; a flag of another objective's, given
// (not at its default), is refused by name.
std::unique_ptr<TrainObjective> make_objective(const TrainArgs& a);

}  // namespace fitgrad::train
