// Checks on command-line values that CLI11's own conversions do not make.
#pragma once

#include <CLI/CLI.hpp>

namespace fitgrad::apps {

// An unsigned 64-bit integer written in decimal digits: "-1", "2^64", "1e23" and "nan" are
// refused with the range, instead of wrapping or saturating (--seed); the flag table's own
// check (train::u64_digits in train/train_flags.h).
CLI::Validator u64_digits();

}  // namespace fitgrad::apps
