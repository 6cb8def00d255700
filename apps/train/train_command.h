// Registers the `train` subcommand of the `fitgrad` command line (trainer.h does the work).
#pragma once
#include <CLI/CLI.hpp>

namespace fitgrad::apps {

void add_train_command(CLI::App& app);

}  // namespace fitgrad::apps
