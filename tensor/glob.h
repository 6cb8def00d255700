// Glob patterns over dotted names (parameter and module paths): nn::Module::freeze matches
// parameters with them, GaLore its target weights (optim/galore.h).
#pragma once

#include <string>

namespace fitgrad {

// `name` matches the glob `pattern` as a whole: `*` matches any run of characters (dots
// included), `?` one character, anything else itself.
bool glob_match(const std::string& pattern, const std::string& name);

}  // namespace fitgrad
