// Checks on command-line values that CLI11's own conversions do not make, and the readings
// of values that several commands share.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace fitgrad::apps {

// An unsigned 64-bit integer written in decimal digits: "-1", "2^64", "1e23" and "nan" are
// refused with the range, instead of wrapping or saturating (--seed).
CLI::Validator u64_digits();

// The bytes of the regular file at `path`; throws "[command] cannot open the <what> '<path>'".
std::string read_whole_file(const char* command, const char* what, const std::string& path);

}  // namespace fitgrad::apps
