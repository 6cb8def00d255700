// --reward_funcs: the built-in reward functions a run names, described by one table
// (reward_func_table) from which the parsing, the flag's help and the errors all come.
//
// Note [Reward function lists]
// --reward_funcs is a comma-separated list of entries NAME or NAME:ARGUMENT, such as
//     exact_match:answer,format:.*####\s*-?\d+\s*$,length_penalty:16
// A comma inside an argument is kept when it is inside (), [] or {} (a regular expression's
// {1,3} or [,;]) or written \, (which RE2 reads as a comma); every other comma ends the entry.
// An entry without an argument takes the table's default. The same name may appear twice (two
// format patterns), each a function of its own with its own weight. The functions are listed
// in the entries' order, and --reward_command, when given, is one more function after them
// (--reward_weights counts it). Each function's metrics are named by the entry's name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/rewards/reward_function.h"

namespace fitgrad::train::rewards {

// What the built-ins need from the run.
struct RewardContext {
  int64_t max_completion_length = 0;  // length_penalty's L_max
};

struct RewardFuncRow {
  std::string name;
  std::string argument;  // what its argument is, for --help
  std::string fallback;  // the argument when none is given; "" for a required one
  std::string help;      // what it scores
  RewardFunctions::value_type (*make)(const std::string& argument, const RewardContext& ctx);
};

// The built-ins, in --help order.
const std::vector<RewardFuncRow>& reward_func_table();

// The --help text of --reward_funcs, made from the table.
std::string reward_funcs_help();

// The entries of a --reward_funcs value, split as Note [Reward function lists] says, each
// (name, argument; the argument empty when none was given). Throws "[grpo] --reward_funcs
// ..." for an empty entry.
std::vector<std::pair<std::string, std::string>> split_reward_funcs(const std::string& spec);

// The functions of --reward_funcs `spec` (Note [Reward function lists]), then a CommandReward
// for a non-empty `command` with `timeout_seconds`. Throws "[grpo] --reward_funcs ..." for
// an unknown name (listing the table's) or a missing required argument, and the function's
// own error for a bad argument.
RewardFunctions make_reward_functions(const std::string& spec, const RewardContext& ctx,
                                      const std::string& command = "", double timeout_seconds = 0);

}  // namespace fitgrad::train::rewards
