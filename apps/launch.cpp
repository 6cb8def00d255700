// The launcher of data-parallel jobs (launch.h, Note [The launcher]).
#include "apps/launch.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "dist/store.h"
#include "tensor/error.h"

namespace fitgrad::apps {
namespace {

namespace fs = std::filesystem;

volatile sig_atomic_t g_signal = 0;
extern "C" void record_signal(int sig) { g_signal = sig; }

bool is_fitgrad_subcommand(const std::string& word) {
  static constexpr std::array<const char*, 7> kSubcommands = {
      "train", "generate", "inspect", "export", "quantize", "memplan", "memviz"};
  for (const char* s : kSubcommands)
    if (word == s) return true;
  return false;
}

std::string self_path() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("fitgrad") : p.string();
}

// The child's side of fork(): the rank's environment, then the command.
[[noreturn]] void exec_rank(const LaunchArgs& a, int rank, const std::string& store,
                            const std::vector<std::string>& argv, pid_t launcher) {
  // Note [Ranks in their own sessions]
  ::setsid();
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != launcher) ::_exit(128 + SIGTERM);  // the launcher died before prctl
  // Note [Launching on several hosts]
  const std::string global = std::to_string(a.node_rank * a.nproc_per_node + rank);
  const std::string local = std::to_string(rank), n = std::to_string(a.nproc_per_node);
  ::setenv("RANK", global.c_str(), 1);
  ::setenv("LOCAL_RANK", local.c_str(), 1);
  ::setenv("GROUP_RANK", std::to_string(a.node_rank).c_str(), 1);
  ::setenv("WORLD_SIZE", std::to_string(a.nnodes * a.nproc_per_node).c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", n.c_str(), 1);
  ::setenv("MASTER_ADDR", a.master_addr.c_str(), 1);
  ::setenv("MASTER_PORT", std::to_string(a.master_port).c_str(), 1);
  if (!store.empty()) ::setenv("FITGRAD_STORE", ("file:" + store).c_str(), 1);
  if (!a.rdzv_endpoint.empty()) ::setenv("FITGRAD_STORE", ("redis:" + a.rdzv_endpoint).c_str(), 1);
  // Note [The launcher]: the cores shared out, unless the user chose.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const unsigned share = std::max(1u, cores / unsigned(a.nproc_per_node));
  ::setenv("OMP_NUM_THREADS", std::to_string(share).c_str(), /*overwrite=*/0);
  std::vector<char*> args;
  for (const std::string& s : argv) args.push_back(const_cast<char*>(s.c_str()));
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  const std::string msg = fmt::format("fitgrad launch: rank {}: cannot run {}\n", rank, argv[0]);
  (void)!::write(2, msg.data(), msg.size());
  ::_exit(127);
}

int exit_code(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}

}  // namespace

CLI::App* add_launch_command(CLI::App& app, LaunchArgs& a) {
  CLI::App* cmd = app.add_subcommand(
      "launch", "Run a command as N ranks of a data-parallel job on this host (as torchrun)");
  cmd->add_option("--nproc_per_node", a.nproc_per_node, "Ranks (processes) to start")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--nnodes", a.nnodes,
                  "Hosts of the job, each running this launcher with its own --node_rank")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  cmd->add_option("--node_rank", a.node_rank, "This host's index in [0, --nnodes)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--master_addr", a.master_addr, "MASTER_ADDR of the ranks")
      ->capture_default_str();
  cmd->add_option("--master_port", a.master_port, "MASTER_PORT of the ranks")
      ->check(CLI::Range(1, 65535))
      ->capture_default_str();
  cmd->add_option("--rdzv_endpoint", a.rdzv_endpoint,
                  "HOST:PORT of a Redis server where the ranks of every host meet (default: "
                  "MASTER_ADDR:MASTER_PORT across hosts, a temporary directory on one)");
  cmd->add_option("--stop_timeout", a.stop_timeout,
                  "Seconds the ranks get to stop after a signal (a training run finishes its "
                  "step and saves) before they are killed; a second signal kills them at once")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  cmd->prefix_command();
  cmd->footer(
      "The command follows the options: `fitgrad launch --nproc_per_node 2 train --model "
      "gpt2-tiny ...` (a fitgrad subcommand runs this fitgrad). Each rank gets RANK, "
      "LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and FITGRAD_STORE. "
      "When a rank fails the others are stopped and the launcher exits with its code.");
  return cmd;
}

int run_launch(const LaunchArgs& a, std::ostream& err) {
  if (a.command.empty())
    throw Error("[launch] no command: `fitgrad launch --nproc_per_node N train ...`");
  if (a.node_rank >= a.nnodes)
    throw Error(
        fmt::format("[launch] --node_rank {} of --nnodes {}: give each host an index "
                    "in [0, {})",
                    a.node_rank, a.nnodes, a.nnodes));
  if (!a.rdzv_endpoint.empty()) {
    if (!dist::parse_endpoint(a.rdzv_endpoint))
      throw Error(
          fmt::format("[launch] --rdzv_endpoint {}: give the Redis server as HOST:PORT, such as "
                      "10.0.0.1:29500",
                      a.rdzv_endpoint));
    if (const char* store = std::getenv("FITGRAD_STORE"); store && *store)
      throw Error(fmt::format(
          "[launch] --rdzv_endpoint {} and FITGRAD_STORE={} both name the store; keep one",
          a.rdzv_endpoint, store));
  }
  std::vector<std::string> argv = a.command;
  if (is_fitgrad_subcommand(argv.front())) argv.insert(argv.begin(), self_path());
  // The store this launcher makes and removes: one host's job only (Note [Launching on
  // several hosts]).
  std::string store;
  if (a.nnodes == 1 && a.rdzv_endpoint.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    // mkdtemp's template: six 'X' that it replaces.
    std::string pattern =
        fmt::format("{}/fitgrad-launch-{}", tmp && *tmp ? tmp : "/tmp", std::string(6, 'X'));
    if (!::mkdtemp(pattern.data()))
      throw Error(fmt::format("[launch] cannot make a store directory {}", pattern));
    store = pattern;
  }

  struct sigaction action = {};
  action.sa_handler = record_signal;
  sigemptyset(&action.sa_mask);
  std::array<struct sigaction, 3> previous{};
  const std::array<int, 3> forwarded = {SIGINT, SIGTERM, SIGHUP};
  for (size_t i = 0; i < forwarded.size(); ++i) ::sigaction(forwarded[i], &action, &previous[i]);

  const pid_t launcher = ::getpid();
  std::vector<pid_t> pids(size_t(a.nproc_per_node), -1);
  std::vector<bool> running(pids.size(), false);
  for (int rank = 0; rank < a.nproc_per_node; ++rank) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      for (size_t i = 0; i < forwarded.size(); ++i)
        ::sigaction(forwarded[i], &previous[i], nullptr);
      exec_rank(a, rank, store, argv, launcher);
    }
    if (pid < 0) break;  // the ranks started so far are stopped below
    pids[size_t(rank)] = pid;
    running[size_t(rank)] = true;
  }

  using Clock = std::chrono::steady_clock;
  int failed_rank = -1, result = 0, alive = 0;
  for (bool r : running) alive += r;
  if (alive < a.nproc_per_node) {
    err << fmt::format("fitgrad launch: could only start {} of {} ranks\n", alive,
                       a.nproc_per_node);
    result = 1;
    failed_rank = alive;
  }
  constexpr Clock::time_point kNever = Clock::time_point::max();
  Clock::time_point kill_at = kNever;  // when the ranks still running get SIGKILL
  auto signal_all = [&](int sig) {
    for (size_t k = 0; k < pids.size(); ++k)
      if (running[k]) ::kill(pids[k], sig);
  };
  if (failed_rank >= 0) {
    signal_all(SIGTERM);
    kill_at = Clock::now() + std::chrono::seconds(10);
  }
  // A local index's rank in the job (Note [Launching on several hosts]).
  auto global_rank = [&](size_t k) { return int64_t(a.node_rank) * a.nproc_per_node + int64_t(k); };
  auto still_running = [&] {
    std::vector<int64_t> ranks;
    for (size_t k = 0; k < pids.size(); ++k)
      if (running[k]) ranks.push_back(global_rank(k));
    return fmt::format("{}", fmt::join(ranks, ", "));
  };
  int signals = 0;
  while (alive > 0) {
    if (const int sig = g_signal) {
      g_signal = 0;
      if (++signals == 1) {
        // Note [Ranks in their own sessions]: SIGHUP reaches a rank as SIGTERM, which a
        // training run stops on with a checkpoint.
        signal_all(sig == SIGHUP ? SIGTERM : sig);
        const auto deadline = Clock::now() + std::chrono::seconds(a.stop_timeout);
        kill_at = std::min(kill_at, deadline);
      } else {
        err << fmt::format("fitgrad launch: a second signal: killing rank(s) {}\n",
                           still_running());
        signal_all(SIGKILL);
        kill_at = kNever;
      }
    }
    if (Clock::now() >= kill_at) {
      err << fmt::format(
          "fitgrad launch: rank(s) {} still running {}; killing them\n", still_running(),
          signals > 0 ? fmt::format("--stop_timeout {} s after the signal", a.stop_timeout)
                      : std::string("10 s after they were told to stop"));
      signal_all(SIGKILL);
      kill_at = kNever;
    }
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    size_t rank = 0;
    while (rank < pids.size() && pids[rank] != pid) ++rank;
    if (rank == pids.size()) continue;
    running[rank] = false;
    --alive;
    const int code = exit_code(status);
    if (code == 0 || result != 0) continue;
    result = code;
    failed_rank = int(rank);
    if (signals > 0) continue;  // every rank got the signal and stops by itself
    err << fmt::format("fitgrad launch: rank {} (pid {}) {} {}; stopping the other ranks\n",
                       global_rank(rank), pid,
                       WIFSIGNALED(status) ? "was killed by signal" : "exited with code",
                       WIFSIGNALED(status) ? WTERMSIG(status) : code);
    signal_all(SIGTERM);
    kill_at = Clock::now() + std::chrono::seconds(10);
  }
  for (size_t i = 0; i < forwarded.size(); ++i) ::sigaction(forwarded[i], &previous[i], nullptr);
  std::error_code ec;
  if (!store.empty()) fs::remove_all(store, ec);
  if (result != 0)
    err << fmt::format("fitgrad launch: {}: rank {} exited with code {}\n",
                       signals > 0 ? "stopped by a signal" : "the job failed",
                       global_rank(size_t(failed_rank)), result);
  return result;
}

}  // namespace fitgrad::apps
