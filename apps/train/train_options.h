// The `fitgrad train` options on a CLI11 command: every row of the flag table
// (train/train_flags.h, Note [One flag table]) bound to its TrainArgs field, with its help,
// default, choices and check, and --validation_split_percentage, which sets --val_fraction in
// percent. `train` and `memplan` register them.
#pragma once

#include <CLI/CLI.hpp>

#include "train/train_args.h"

namespace fitgrad::apps {

void add_train_options(CLI::App& cmd, train::TrainArgs& args);

}  // namespace fitgrad::apps
