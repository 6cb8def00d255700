// Checks on command-line values that CLI11's own conversions do not make, and the readings
// of values that several commands share.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "tensor/dtype.h"

namespace fitgrad::apps {

// An unsigned 64-bit integer written in decimal digits: "-1", "2^64", "1e23" and "nan" are
// refused with the range, instead of wrapping or saturating (--seed).
CLI::Validator u64_digits();

// The options every inference command (generate, eval) shares, described here once: --model
// (required), --init, --device and --dtype (read with inference_dtype).
void add_inference_model_options(CLI::App& cmd, std::string& model, std::string& init,
                                 std::string& device, std::string& dtype);

// The dtype an inference command (generate, eval) computes in: "f32" or "bf16"; anything
// else throws "[command] --dtype must be f32 or bf16, got '...'".
DType inference_dtype(const char* command, const std::string& name);

// The bytes of the regular file at `path`; throws "[command] cannot open the <what> '<path>'".
std::string read_whole_file(const char* command, const char* what, const std::string& path);

}  // namespace fitgrad::apps
