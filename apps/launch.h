// `fitgrad launch --nproc_per_node N <command...>`: runs N copies of a command on this host
// as the ranks of one data-parallel job, the way torchrun does.
//
// Note [The launcher]
// Each rank runs with torchrun's variables (RANK = LOCAL_RANK = k, WORLD_SIZE =
// LOCAL_WORLD_SIZE = N, MASTER_ADDR, MASTER_PORT) and FITGRAD_STORE naming a Gloo FileStore
// in a fresh temporary directory (Note [Rendezvous stores] in dist/rendezvous.h), removed
// when the job ends; every card stays visible to every rank, and `--device cuda` gives each
// its own, cuda:LOCAL_RANK (Note [One card per rank] in dist/rank_device.h). Where OMP_NUM_THREADS is unset, each rank gets the host's cores divided
// by N (at least 1) as its thread budget, so N ranks do not oversubscribe the cores (torchrun
// sets 1). A command that starts with a fitgrad subcommand (`train ...`) runs this
// fitgrad; any other runs as given (found on PATH). SIGINT, SIGTERM and SIGHUP are forwarded
// to every rank (a training run agrees on the step to stop at and saves; Note [Ranks in their
// own sessions] says how each rank gets a signal once, however it was sent). When a rank exits
// with a non-zero code, or is killed, the launcher says which rank, stops the others
// (SIGTERM, then SIGKILL after 10 s) and exits with that rank's code (128 + the signal of a
// killed rank); otherwise it exits 0 once every rank has.
//
// Note [Ranks in their own sessions]
// A Ctrl-C at a terminal, `kill -INT -- -PGID`, `timeout N fitgrad launch ...` and most
// schedulers signal the launcher's whole process group. Were the ranks in that group, each
// would get the signal twice, directly and forwarded, and the second one, arriving after the
// handler has restored the default action (apps/interrupt.h), would kill it mid-step with no
// checkpoint. So each rank starts a session of its own (setsid, as torchrun starts its
// workers) and gets a signal only from the launcher, once. The ranks then have no
// controlling terminal, so a terminal's hangup reaches only the launcher, which forwards it
// as SIGTERM (a rank stops on that with a checkpoint). A launcher that dies, even by SIGKILL,
// takes its ranks along: each has PR_SET_PDEATHSIG set to SIGTERM, so they agree on a step
// to stop at and save as after a signal, and release the output directory. After a signal
// the ranks have --stop_timeout seconds (300 by default: the step in flight, then the save)
// before the launcher kills them, so a stopped or stuck rank cannot keep the job alive; a
// second signal kills them at once, as a second Ctrl-C ends one process.
//
// Note [Launching on several hosts]
// With --nnodes N (torchrun's name) the launcher runs on each of N hosts with its own
// --node_rank K, and its ranks are K * nproc_per_node + k of WORLD_SIZE = N * nproc_per_node
// (LOCAL_RANK = k, LOCAL_WORLD_SIZE = nproc_per_node, GROUP_RANK = K, as torchrun sets them).
// A job across hosts cannot meet in one host's temporary directory: the launcher passes on
// the user's FITGRAD_STORE (a directory every host reaches, or a Redis server), or the Redis
// server that --rdzv_endpoint HOST:PORT names (torchrun's flag, here always a Redis server),
// else the ranks use the RedisStore at MASTER_ADDR:MASTER_PORT (Note [Rendezvous stores] in
// dist/rendezvous.h), and it removes no store it did not make. The README's two-node recipe
// is rehearsed on one machine in network namespaces by `make multihost-check`
// (tools/multihost-check.sh).
#pragma once
#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace fitgrad::apps {

struct LaunchArgs {
  int nproc_per_node = 1;
  int nnodes = 1;     // Note [Launching on several hosts]
  int node_rank = 0;  // this host's index in [0, nnodes)
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string rdzv_endpoint;  // HOST:PORT of a Redis server (Note [Launching on several hosts])
  int stop_timeout = 300;     // seconds (Note [Ranks in their own sessions])
  std::vector<std::string> command;
};

CLI::App* add_launch_command(CLI::App& app, LaunchArgs& args);

// Runs the job (Note [The launcher]); `err` gets the launcher's own lines.
int run_launch(const LaunchArgs& args, std::ostream& err);

}  // namespace fitgrad::apps
