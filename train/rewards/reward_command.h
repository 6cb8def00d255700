// --reward_command: a user's program as a reward function. For each batch it runs the
// program once, without a shell, writes one JSON line per completion to its stdin and reads
// one number per line from its stdout.
//
// Note [Reward command protocol]
//   - The command line is split into words as a POSIX shell splits them, without any
//     expansion: white space separates words; '...' keeps everything inside literally;
//     "..." keeps everything inside except that a backslash escapes '"' and '\'; outside
//     quotes a backslash keeps the next character. No $variables, globs, ~, pipes or
//     redirections: `python3 score.py --strict` runs python3 with two arguments. The first
//     word is the program, looked up on PATH when it has no '/'.
//   - Input, one line per completion in order: {"prompt": <text>, "completion": <text>,
//     "completion_tokens": <count>, "truncated": <bool>, then every other column of the row},
//     as compact JSON; bytes that are not UTF-8 are replaced by U+FFFD (a completion cut in the
//     middle of a character), so every line is valid JSON. A row's own "prompt" or
//     "completion" column is replaced by the text.
//   - Output, one line per input line: a number (as strtod reads it, white space around it
//     allowed), or "nan", "null" or "None" for no reward (TRL's None, Note [Rewards as TRL
//     scores them]). The program may also write to stderr, whose end is quoted in errors.
//   - Any failure is a fitgrad::Error naming the command: the program not found or not
//     runnable; a non-zero exit or death by a signal (with the end of its stderr); not
//     exactly one line per completion; a line that is not a number, or an infinite one (its
//     line number and text); no answer within --reward_timeout seconds, or more than 1 MiB
//     + 128 bytes per completion written to stdout (the program is killed). A run that meets one stops with the error before the step trains, so its last
//     checkpoint stands.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "train/rewards/reward_function.h"

namespace fitgrad::train::rewards {

// The default of --reward_timeout, in seconds: a whole batch's answers.
inline constexpr double kDefaultRewardTimeout = 60;

// Splits a command line into words (Note [Reward command protocol]); throws "[reward_command]
// ..." for an unclosed quote or an empty command.
std::vector<std::string> split_command(const std::string& command);

// The JSON line a sample is sent as (Note [Reward command protocol]), without the newline.
std::string reward_input_line(const RewardSample& sample);

class CommandReward : public RewardFunction {
 public:
  // `timeout_seconds` > 0 bounds each batch's run.
  CommandReward(const std::string& command, double timeout_seconds);
  std::string name() const override { return "command"; }
  std::vector<double> score(std::span<const RewardSample> samples) override;

 private:
  std::string command_;
  std::vector<std::string> argv_;
  std::chrono::milliseconds timeout_;
};

}  // namespace fitgrad::train::rewards
