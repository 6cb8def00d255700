// --reward_command (Note [Reward command protocol], Note [Running a child program]): a
// program run without a shell, fed JSON lines, answering a number a line. Every failure is an
// error naming the command and what went wrong; the programs are small sh and python3 scripts.
// A large batch does not deadlock, a child that stops reading does not kill this process with
// SIGPIPE, and a child (with what it started) is killed at its time bound and on SIGINT.
#include "train/rewards/reward_command.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tensor/interrupt.h"
#include "tests/tensor/ops/op_harness.h"
#include "train/rewards/child_process.h"

namespace fitgrad::train::rewards {
namespace {

namespace fs = std::filesystem;
using fitgrad::testing::expect_error;

std::vector<RewardSample> samples(size_t n, const std::string& completion = "c") {
  std::vector<RewardSample> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i].prompt = fmt::format("p{}", i);
    out[i].completion = completion;
    out[i].completion_ids = {1, 2};
    out[i].row = {{"answer", int(i)}, {"prompt", "the row's own"}};
  }
  return out;
}

// A command line for `sh -c SCRIPT`, quoted for split_command.
std::string sh(const std::string& script) { return "sh -c '" + script + "'"; }

// A file name under the test's temporary folder.
fs::path temp_file(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("fitgrad-reward-{}", ::getpid());
  fs::create_directories(dir);
  return dir / name;
}

// Whether process `pid` still exists (a zombie counts, as nobody reaped it).
bool process_exists(pid_t pid) { return fs::exists(fmt::format("/proc/{}", pid)); }

// The pid a script wrote to `file`, once it is there.
pid_t read_pid(const fs::path& file) {
  for (int i = 0; i < 500 && !fs::exists(file); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::ifstream in(file);
  pid_t pid = 0;
  in >> pid;
  return pid;
}

TEST(SplitCommand, QuotesAndBackslashesWithoutExpansion) {
  EXPECT_EQ(split_command("  python3 score.py   --strict "),
            (std::vector<std::string>{"python3", "score.py", "--strict"}));
  EXPECT_EQ(split_command(R"(a 'b c' "d \"e\" \\ $HOME" f\ g '')"),
            (std::vector<std::string>{"a", "b c", "d \"e\" \\ $HOME", "f g", ""}));
  expect_error([] { split_command("sh -c 'echo"); }, "[reward_command]", "never closed");
  expect_error([] { split_command("   "); }, "[reward_command] the command is empty");
}

TEST(RewardCommand, InputLinesCarryTheTextsAndTheRowsOtherColumnsAsValidUtf8) {
  RewardSample s = samples(1,
                           "a\xff"
                           "b")[0];
  const nlohmann::json line = nlohmann::json::parse(reward_input_line(s));
  EXPECT_EQ(line.at("prompt"), "p0");  // the row's own "prompt" column is replaced
  EXPECT_EQ(line.at("completion"),
            "a\xEF\xBF\xBD"
            "b");  // U+FFFD for the stray byte
  EXPECT_EQ(line.at("completion_tokens"), 2);
  EXPECT_EQ(line.at("truncated"), false);
  EXPECT_EQ(line.at("answer"), 0);
}

TEST(RewardCommand, AnswersOneNumberPerCompletion) {
  // The program reads the JSON itself: reward = answer + the completion's length, and no
  // reward (nan) for the third; the completion has a byte that is not UTF-8.
  CommandReward f(
      "python3 -c \"import json, sys\n"
      "for line in sys.stdin:\n"
      "    r = json.loads(line)\n"
      "    print('nan' if r['answer'] == 2 else r['answer'] + len(r['completion']))\"",
      30);
  const auto rewards = f.score(samples(4, "ab\xff"));
  ASSERT_EQ(rewards.size(), 4u);
  EXPECT_EQ(rewards[0], 3);
  EXPECT_EQ(rewards[1], 4);
  EXPECT_TRUE(std::isnan(rewards[2]));
  EXPECT_EQ(rewards[3], 6);
}

TEST(RewardCommand, EachFailureNamesTheCommand) {
  expect_error(
      [] { CommandReward(sh("cat >/dev/null; echo oops >&2; exit 3"), 30).score(samples(2)); },
      "[reward_command 'sh -c 'cat >/dev/null; echo oops >&2; exit 3'']",
      "exited with status 3; its stderr ends: oops");
  expect_error([] { CommandReward(sh("kill -9 $$"), 30).score(samples(1)); }, "[reward_command",
               "was killed by signal 9");
  expect_error([] { CommandReward(sh("cat >/dev/null; echo 1"), 30).score(samples(3)); },
               "[reward_command", "answered 1 lines for 3 completions");
  expect_error(
      [] { CommandReward(sh("cat >/dev/null; echo 1; echo 2; echo 3"), 30).score(samples(2)); },
      "[reward_command", "answered 3 lines for 2 completions");
  expect_error([] { CommandReward(sh("cat >/dev/null; echo 1; echo abc"), 30).score(samples(2)); },
               "[reward_command", "line 2 of its output, 'abc', is not a finite number");
  expect_error([] { CommandReward(sh("cat >/dev/null; echo inf"), 30).score(samples(1)); },
               "[reward_command", "line 1 of its output, 'inf'");
  expect_error([] { CommandReward("yes", 30).score(samples(2)); }, "[reward_command 'yes']",
               "wrote more than 1048832 bytes to stdout for 2 completions and was killed");
  expect_error([] { CommandReward("fitgrad-no-such-reward-program", 30).score(samples(1)); },
               "[reward_command 'fitgrad-no-such-reward-program']", "not found on PATH");
  expect_error([] { CommandReward("/dev/null", 30).score(samples(1)); }, "[reward_command",
               "'/dev/null' is not an executable file");
  expect_error([] { CommandReward("true", 0); }, "[reward_command] --reward_timeout");
}

TEST(RewardCommand, ATimeOutKillsTheProgramAndWhatItStarted) {
  const fs::path pid_file = temp_file("timeout.pid");
  fs::remove(pid_file);
  // The script starts a grandchild that would hold the output open for 30 s.
  expect_error(
      [&] {
        CommandReward(sh("sleep 30 & echo $! > " + pid_file.string() + "; wait"), 0.5)
            .score(samples(1));
      },
      "[reward_command", "gave no answer for 1 completions within 0.5 s (--reward_timeout)");
  const pid_t grandchild = read_pid(pid_file);
  ASSERT_GT(grandchild, 0);
  // Killed with the group; reaped by whoever adopted it (a zombie for a moment at most).
  bool gone = false;
  for (int i = 0; i < 500 && !gone; ++i) {
    std::ifstream stat(fmt::format("/proc/{}/stat", grandchild));
    std::string pid, comm, state;
    gone = !(stat >> pid >> comm >> state) || state == "Z";
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(gone) << "the grandchild " << grandchild << " outlived the time-out";
}

TEST(RewardCommand, LargeBatchesDoNotDeadlock) {
  // 20000 lines of 300 bytes in (6 MB), 20000 lines of 16 bytes out (320 kB): both far over a
  // pipe's buffer, answered line by line as they are read.
  CommandReward f("python3 -c \"import sys\nfor line in sys.stdin: print('0.5000000000000')\"",
                  120);
  const auto rewards = f.score(samples(20000, std::string(300, 'x')));
  ASSERT_EQ(rewards.size(), 20000u);
  EXPECT_EQ(rewards.back(), 0.5);
}

TEST(RewardCommand, AProgramThatStopsReadingIsNoSigpipe) {
  CommandReward f(sh("echo 0.25"), 30);
  EXPECT_EQ(f.score(samples(1, std::string(4 << 20, 'x'))), std::vector<double>{0.25});
}

TEST(RunChild, SigintKillsAndReapsTheChild) {
  const fs::path pid_file = temp_file("sigint.pid");
  fs::remove(pid_file);
  std::thread signaller([&] {
    read_pid(pid_file);
    note_interrupt(SIGINT);
  });
  bool interrupted = false;
  try {
    run_child({"sh", "-c", "echo $$ > " + pid_file.string() + "; exec sleep 30"}, "",
              std::chrono::seconds(60), 1024, "[test]");
  } catch (const Interrupted& e) {
    interrupted = e.signal() == SIGINT;
  }
  signaller.join();
  clear_interrupt();
  EXPECT_TRUE(interrupted);
  const pid_t child = read_pid(pid_file);
  ASSERT_GT(child, 0);
  EXPECT_FALSE(process_exists(child)) << "the child " << child << " was left behind";
}

}  // namespace
}  // namespace fitgrad::train::rewards
