// Signals to a data-parallel job, with the built `fitgrad` binary (FITGRAD_CLI), as Note [Ranks
// in their own sessions] in apps/launch.h promises: a signal to the launcher's whole process
// group (a Ctrl-C at a terminal) stops a training job with a checkpoint as a signal to the
// launcher alone does; a SIGKILLed launcher's ranks stop with a checkpoint too; a rank that
// does not stop is killed after --stop_timeout, or at once on a second signal; and a rank
// waiting in the rendezvous for a peer that never comes stops on a signal (Note [Waits that
// stop] in dist/store.h). Each test works in its own fresh directory under /tmp.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/apps/ddp_helpers.h"

namespace {

using namespace fitgrad::ddp_test;
using std::chrono::seconds;

// Starts `fitgrad launch <args>` in a process group of its own (as a shell runs a job), its
// output into `log`; the launcher's pid, which is the group's id.
pid_t start_launch(const std::string& args, const fs::path& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    const std::string command = "exec " + kCli + " launch " + args + " > " + log.string() + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  return pid;
}

// The processes (but this one) whose command line names `dir`: a job's ranks.
std::vector<pid_t> processes_naming(const fs::path& dir) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline");
    const std::string cmdline((std::istreambuf_iterator<char>(in)), {});
    const pid_t pid = std::stoi(name);
    if (pid != ::getpid() && cmdline.find(dir.string()) != std::string::npos) out.push_back(pid);
  }
  return out;
}

// Kills what a failed test left running.
void kill_leftovers(const fs::path& dir) {
  for (pid_t pid : processes_naming(dir)) ::kill(pid, SIGKILL);
}

// The job's training flags: a run far longer than the test, saved only when it stops.
std::string long_run(const fs::path& dir) {
  return "train " + train_flags(write_corpus(dir), 2, 1, 100000) +
         " --save_steps 0 --ddp_timeout 60 --output_dir " + (dir / "out").string();
}

// The output directory holds one whole checkpoint and no temporary one.
void expect_one_whole_checkpoint(const fs::path& out) {
  int checkpoints = 0;
  for (const auto& e : fs::directory_iterator(out)) {
    const std::string name = e.path().filename();
    EXPECT_FALSE(name.starts_with("tmp-")) << name;
    if (!name.starts_with("checkpoint-")) continue;
    ++checkpoints;
    for (const char* f : {"model.safetensors", "optimizer.safetensors", "trainer_state.json"})
      EXPECT_TRUE(fs::exists(e.path() / f)) << e.path() / f;
  }
  EXPECT_EQ(checkpoints, 1);
}

TEST(LaunchSignals, ASignalToTheWholeGroupStopsTheJobWithACheckpoint) {
  const fs::path dir = fresh_dir("launch_group_int");
  const pid_t job = start_launch("--nproc_per_node 2 " + long_run(dir), dir / "launch.log");
  wait_until_training(dir, "launch.log");
  ::kill(-job, SIGINT);  // a Ctrl-C at the terminal
  const int code = wait_for(job, seconds(120));
  const std::string log = read_text(dir / "launch.log");
  EXPECT_EQ(code, 128 + SIGINT) << log;
  EXPECT_NE(log.find("interrupted at step"), std::string::npos) << log;
  expect_one_whole_checkpoint(dir / "out");
  EXPECT_TRUE(fs::exists(dir / "out" / "memory.json"));
  kill_leftovers(dir);
  fs::remove_all(dir);
}

TEST(LaunchSignals, AKilledLaunchersRanksStopWithACheckpoint) {
  const fs::path dir = fresh_dir("launch_killed");
  const pid_t job = start_launch("--nproc_per_node 2 " + long_run(dir), dir / "launch.log");
  wait_until_training(dir, "launch.log");
  ::kill(job, SIGKILL);
  ASSERT_EQ(wait_for(job, seconds(10)), 128 + SIGKILL);
  const auto start = std::chrono::steady_clock::now();
  while (!processes_naming(dir).empty() && std::chrono::steady_clock::now() - start < seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(processes_naming(dir).empty()) << "the ranks outlived their launcher";
  expect_one_whole_checkpoint(dir / "out");
  kill_leftovers(dir);
  fs::remove_all(dir);
}

TEST(LaunchSignals, ARankThatDoesNotStopIsKilledAfterTheStopTimeout) {
  const fs::path dir = fresh_dir("launch_stuck");
  const pid_t job = start_launch(
      "--nproc_per_node 2 --stop_timeout 2 sh -c 'if [ $RANK = 1 ]; then kill -STOP $$; fi; "
      "exec sleep 60' " +
          dir.string(),
      dir / "launch.log");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ::kill(job, SIGTERM);
  const int code = wait_for(job, seconds(20));
  const std::string log = read_text(dir / "launch.log");
  EXPECT_EQ(code, 128 + SIGTERM) << log;  // rank 0's, the first to end
  EXPECT_NE(log.find("rank(s) 1 still running --stop_timeout 2 s after the signal; killing them"),
            std::string::npos)
      << log;
  kill_leftovers(dir);
  fs::remove_all(dir);
}

TEST(LaunchSignals, ASecondSignalKillsTheRanksAtOnce) {
  const fs::path dir = fresh_dir("launch_second");
  const pid_t job = start_launch(
      "--nproc_per_node 2 sh -c 'trap \"\" TERM; while true; do sleep 0.2; done' " + dir.string(),
      dir / "launch.log");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ::kill(job, SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ::kill(job, SIGTERM);
  const int code = wait_for(job, seconds(10));
  const std::string log = read_text(dir / "launch.log");
  EXPECT_EQ(code, 128 + SIGKILL) << log;
  EXPECT_NE(log.find("a second signal: killing rank(s) 0, 1"), std::string::npos) << log;
  kill_leftovers(dir);
  fs::remove_all(dir);
}

TEST(LaunchSignals, ARankWaitingInTheRendezvousStopsOnASignal) {
  const fs::path dir = fresh_dir("rendezvous_stop");
  fs::create_directories(dir / "store");
  const std::string flags = train_flags(write_corpus(dir), 2, 1, 2) + " --ddp_timeout 1800 " +
                            "--output_dir " + (dir / "out").string();
  const pid_t rank0 = start_rank(0, 2, dir / "store", flags, dir / "rank0.log");
  std::this_thread::sleep_for(seconds(2));  // rank 1 never comes
  ::kill(rank0, SIGTERM);
  const auto signalled = std::chrono::steady_clock::now();
  const int code = wait_for(rank0, seconds(30));
  EXPECT_EQ(code, 128 + SIGTERM) << read_text(dir / "rank0.log");
  EXPECT_LT(std::chrono::steady_clock::now() - signalled, seconds(5));
  if (code == -1) ::kill(rank0, SIGKILL);
  fs::remove_all(dir);
}

}  // namespace
