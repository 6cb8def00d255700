// `fitgrad launch --nproc_per_node N <command...>`: runs N copies of a command on this host
// as the ranks of one data-parallel job, the way torchrun does.
//
// Note [The launcher]
// Each rank runs with torchrun's variables (RANK = LOCAL_RANK = k, WORLD_SIZE =
// LOCAL_WORLD_SIZE = N, MASTER_ADDR, MASTER_PORT) and FITGRAD_STORE naming a Gloo FileStore
// in a fresh temporary directory (Note [Rendezvous stores] in dist/rendezvous.h), removed
// when the job ends. Where OMP_NUM_THREADS is unset, each rank gets the host's cores divided
// by N (at least 1) as its thread budget, so N ranks do not oversubscribe the cores (torchrun
// sets 1). A command that starts with a fitgrad subcommand (`train ...`) runs this
// fitgrad; any other runs as given (found on PATH). SIGINT, SIGTERM and SIGHUP are forwarded
// to every rank (a training run agrees on the step to stop at and saves). When a rank exits
// with a non-zero code, or is killed, the launcher says which rank, stops the others
// (SIGTERM, then SIGKILL after 10 s) and exits with that rank's code (128 + the signal of a
// killed rank); otherwise it exits 0 once every rank has.
#pragma once
#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace fitgrad::apps {

struct LaunchArgs {
  int nproc_per_node = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::vector<std::string> command;
};

CLI::App* add_launch_command(CLI::App& app, LaunchArgs& args);

// Runs the job (Note [The launcher]); `err` gets the launcher's own lines.
int run_launch(const LaunchArgs& args, std::ostream& err);

}  // namespace fitgrad::apps
