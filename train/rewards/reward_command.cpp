// split_command and CommandReward (reward_command.h, Note [Reward command protocol]).
#include "train/rewards/reward_command.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>

#include "tensor/error.h"
#include "train/rewards/child_process.h"

namespace fitgrad::train::rewards {
namespace {

std::string trim(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

// The last lines of a program's stderr, for an error message.
std::string stderr_tail(const std::string& err) {
  std::string t = trim(err);
  if (t.empty()) return "";
  constexpr size_t kShown = 600;
  if (t.size() > kShown) t = "..." + t.substr(t.size() - kShown);
  return fmt::format("; its stderr ends: {}", t);
}

}  // namespace

std::vector<std::string> split_command(const std::string& command) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < command.size(); ++i) {
    const char c = command[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\\') {
      FG_CHECK(i + 1 < command.size(), "[reward_command] '{}' ends in a lone backslash", command);
      word += command[++i];
    } else if (c == '\'' || c == '"') {
      const size_t open = i;
      while (true) {
        FG_CHECK(++i < command.size(),
                 "[reward_command] '{}': the quote {} at character {} is never closed", command, c,
                 open + 1);
        if (command[i] == c) break;
        if (c == '"' && command[i] == '\\' && i + 1 < command.size() &&
            (command[i + 1] == '"' || command[i + 1] == '\\'))
          ++i;
        word += command[i];
      }
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(std::move(word));
  FG_CHECK(!words.empty(), "[reward_command] the command is empty");
  return words;
}

std::string reward_input_line(const RewardSample& sample) {
  nlohmann::ordered_json line;
  line["prompt"] = sample.prompt;
  line["completion"] = sample.completion;
  line["completion_tokens"] = sample.completion_ids.size();
  line["truncated"] = sample.truncated;
  if (sample.row.is_object())
    for (const auto& [key, value] : sample.row.items())
      if (key != "prompt" && key != "completion") line[key] = value;
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

CommandReward::CommandReward(const std::string& command, double timeout_seconds)
    : command_(command), argv_(split_command(command)) {
  FG_CHECK(std::isfinite(timeout_seconds) && timeout_seconds > 0,
           "[reward_command] --reward_timeout must be a positive number of seconds, got {}",
           timeout_seconds);
  timeout_ = std::chrono::milliseconds(int64_t(std::ceil(timeout_seconds * 1000)));
}

std::vector<double> CommandReward::score(std::span<const RewardSample> samples) {
  const std::string what = fmt::format("[reward_command '{}']", command_);
  std::string input;
  for (const RewardSample& s : samples) input += reward_input_line(s) + "\n";
  // Room for a long number on every line, and then some: more is a program gone astray.
  const size_t out_limit = (1 << 20) + 128 * samples.size();
  const ChildResult r = run_child(argv_, input, timeout_, out_limit, what);
  FG_CHECK(!r.overflowed,
           "{} wrote more than {} bytes to stdout for {} completions and was killed; it must "
           "print one number per input line",
           what, out_limit, samples.size());
  FG_CHECK(!r.timed_out,
           "{} gave no answer for {} completions within {} s (--reward_timeout) and was "
           "killed{}",
           what, samples.size(), double(timeout_.count()) / 1000, stderr_tail(r.err));
  FG_CHECK(r.signal == 0, "{} was killed by signal {} ({}){}", what, r.signal, strsignal(r.signal),
           stderr_tail(r.err));
  FG_CHECK(r.exit_code == 0, "{} exited with status {}{}", what, r.exit_code, stderr_tail(r.err));
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < r.out.size()) {
    const size_t nl = r.out.find('\n', start);
    const size_t end = nl == std::string::npos ? r.out.size() : nl;
    lines.push_back(r.out.substr(start, end - start));
    start = end + 1;
  }
  FG_CHECK(lines.size() == samples.size(),
           "{} answered {} lines for {} completions; it must print one number per input line{}",
           what, lines.size(), samples.size(),
           r.input_cut ? " (it closed its stdin before reading all of it)" : "");
  std::vector<double> out;
  out.reserve(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string t = trim(lines[i]);
    if (t == "nan" || t == "NaN" || t == "null" || t == "None") {
      out.push_back(std::nan(""));
      continue;
    }
    char* end = nullptr;
    const double v = t.empty() ? 0 : std::strtod(t.c_str(), &end);
    FG_CHECK(!t.empty() && end == t.c_str() + t.size() && std::isfinite(v),
             "{}: line {} of its output, '{}', is not a finite number (for the completion on "
             "input line {}); print a number, or nan for no reward",
             what, i + 1, lines[i], i + 1);
    out.push_back(v);
  }
  return out;
}

}  // namespace fitgrad::train::rewards
