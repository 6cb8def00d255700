// The command-line flag reader of the plain benchmark programs (train_step_bench,
// head_panels_bench): they take --name=value flags only, and a program's parser asks each
// argument for each of its flags in turn.
#pragma once

#include <cstring>
#include <string>

namespace fitgrad::bench {

// The text after "flag=" when `arg` is "flag=" followed by at least one character, else null.
inline const char* flag_value(const std::string& arg, const char* flag) {
  const size_t n = std::strlen(flag);
  return arg.compare(0, n, flag) == 0 && arg.size() > n && arg[n] == '=' ? arg.c_str() + n + 1
                                                                         : nullptr;
}

}  // namespace fitgrad::bench
