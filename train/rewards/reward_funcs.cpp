// The built-in reward table and the --reward_funcs parser (reward_funcs.h).
#include "train/rewards/reward_funcs.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>

#include "tensor/error.h"
#include "train/rewards/answer_match.h"
#include "train/rewards/format_reward.h"
#include "train/rewards/length_penalty.h"
#include "train/rewards/reward_command.h"

namespace fitgrad::train::rewards {
namespace {

int64_t token_count(const std::string& argument) {
  int64_t n = -1;
  const auto [end, ec] = std::from_chars(argument.data(), argument.data() + argument.size(), n);
  FG_CHECK(ec == std::errc() && end == argument.data() + argument.size() && n >= 0,
           "[grpo] --reward_funcs length_penalty:{}: the soft band must be a whole number of "
           "tokens",
           argument);
  return n;
}

}  // namespace

const std::vector<RewardFuncRow>& reward_func_table() {
  static const std::vector<RewardFuncRow> table = {
      {"exact_match", "COLUMN", "answer",
       "1 when the last \\boxed{} or the text after #### equals the row's COLUMN (numbers by "
       "value), else 0",
       [](const std::string& a, const RewardContext&) -> RewardFunctions::value_type {
         return std::make_unique<AnswerMatchReward>(AnswerExtraction::marker, a);
       }},
      {"last_number", "COLUMN", "answer",
       "1 when the completion's last number equals the row's COLUMN, else 0",
       [](const std::string& a, const RewardContext&) -> RewardFunctions::value_type {
         return std::make_unique<AnswerMatchReward>(AnswerExtraction::last_number, a);
       }},
      {"format", "REGEX", "",
       "1 when the completion matches REGEX from its start ('.' matches newlines), else 0",
       [](const std::string& a, const RewardContext&) -> RewardFunctions::value_type {
         return std::make_unique<FormatReward>(a);
       }},
      {"length_penalty", "TOKENS", "",
       "DAPO's soft overlong punishment: 0 up to max_completion_length - TOKENS, then falling "
       "linearly to -1 at max_completion_length",
       [](const std::string& a, const RewardContext& ctx) -> RewardFunctions::value_type {
         return std::make_unique<LengthPenalty>(ctx.max_completion_length, token_count(a));
       }},
  };
  return table;
}

std::string reward_funcs_help() {
  std::string help =
      "built-in reward functions, comma-separated NAME or NAME:ARGUMENT (a comma inside (), [] "
      "or {} or written \\, stays in the argument):";
  for (const RewardFuncRow& row : reward_func_table())
    help += fmt::format(" {}:{} ({}{});", row.name, row.argument, row.help,
                        row.fallback.empty() ? "" : fmt::format("; default {}", row.fallback));
  help.back() = '.';
  return help;
}

std::vector<std::pair<std::string, std::string>> split_reward_funcs(const std::string& spec) {
  std::vector<std::string> entries;
  std::string entry;
  int depth = 0;
  for (size_t i = 0; i < spec.size(); ++i) {
    const char c = spec[i];
    if (c == '\\' && i + 1 < spec.size()) {
      entry += c;
      entry += spec[++i];
      continue;
    }
    if (c == '(' || c == '[' || c == '{') ++depth;
    if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
    if (c == ',' && depth == 0) {
      entries.push_back(std::move(entry));
      entry.clear();
      continue;
    }
    entry += c;
  }
  entries.push_back(std::move(entry));
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string& e = entries[i];
    const size_t colon = e.find(':');
    std::string name = e.substr(0, colon);
    FG_CHECK(!name.empty(), "[grpo] --reward_funcs '{}': entry {} is empty", spec, i + 1);
    out.emplace_back(std::move(name), colon == std::string::npos ? "" : e.substr(colon + 1));
  }
  return out;
}

RewardFunctions make_reward_functions(const std::string& spec, const RewardContext& ctx,
                                      const std::string& command, double timeout_seconds) {
  RewardFunctions functions;
  if (!spec.empty()) {
    for (const auto& [name, argument] : split_reward_funcs(spec)) {
      const RewardFuncRow* row = nullptr;
      std::vector<std::string> names;
      for (const RewardFuncRow& r : reward_func_table()) {
        names.push_back(r.name);
        if (r.name == name) row = &r;
      }
      FG_CHECK(row, "[grpo] --reward_funcs: unknown reward function '{}'; the built-ins are {}",
               name, fmt::join(names, ", "));
      const std::string a = argument.empty() ? row->fallback : argument;
      FG_CHECK(!a.empty(), "[grpo] --reward_funcs: {} needs an argument, {}:{}", name, name,
               row->argument);
      functions.push_back(row->make(a, ctx));
    }
  }
  if (!command.empty())
    functions.push_back(std::make_unique<CommandReward>(command, timeout_seconds));
  FG_CHECK(!functions.empty(),
           "[grpo] no reward function: give --reward_funcs (such as exact_match:answer) or "
           "--reward_command");
  return functions;
}

}  // namespace fitgrad::train::rewards
