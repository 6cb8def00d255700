// Every `fitgrad train` flag, described once: its name, the TrainArgs field it sets, its
// help, the values it accepts, and what a run does with it besides (Note [One flag table]).
//
// Note [One flag table]
// train_flags() lists every flag of `fitgrad train` (and so of memplan, which takes them all)
// with the values it accepts, its check, the flag it does nothing without, and its traits:
// whether the ranks of a data-parallel job must agree on it, whether a resume must keep it,
// and whether memplan's suggested command line carries it. Everything that lists flags is
// generated from it: the CLI and its --help (add_train_options in
// apps/train/train_options.h), the checks of a TrainArgs that a program filled in itself
// (check_values, check_needs), the ranks' configuration check (config_fingerprint), the
// run's saved arguments in trainer_state.json and the resume's check of them, and memplan's
// command line (setting_flags in apps/memplan/search.h). A field added to TrainArgs is a
// flag only once it is in the table; tests/apps/train_flags_test.cpp checks that every
// registered option is in it, that the library refuses the values the CLI refuses, that the
// ranks' check and the resume check cover exactly the flags marked so, and that memplan's
// line parses back into the same values. Flags a rank may set for itself (its memory budget,
// loader threads, progress display, reporting) are the only ones the ranks need not agree
// on. A checkpoint that predates a flag has no value for it, and its resume does not check
// it.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tensor/device.h"
#include "train/train_args.h"

namespace fitgrad::train {

using FlagField = std::variant<std::string TrainArgs::*, int64_t TrainArgs::*, int TrainArgs::*,
                               uint64_t TrainArgs::*, double TrainArgs::*, bool TrainArgs::*>;

// A flag's traits (Note [One flag table]), or-ed together.
enum FlagTrait : unsigned {
  kRanksAgree = 1u << 0,   // the ranks of a job must give the same value
  kResumeKeeps = 1u << 1,  // a resume refuses a value other than the checkpoint's
  kPlanLine = 1u << 2,     // memplan's command line carries it when it is not train's default
  kAlwaysOnPlanLine = kPlanLine | 1u << 3,  // ... and even when it is
  kRequired = 1u << 4,
};

// A check of a flag's value as a command line writes it (flag_text): "" when the value passes,
// else what is wrong with it ("must be ..."). The CLI runs it on what the user typed (its
// --help shows `shown`), and validate() on a TrainArgs a program filled in itself.
struct FlagCheck {
  std::string shown;  // such as "POSITIVE" or "[0 - 2]"
  std::function<std::string(const std::string&)> error;
};
FlagCheck positive_number();
FlagCheck number_in(double lo, double hi);
// An unsigned 64-bit integer in decimal digits: "-1", "2^64", "1e23" and "nan" are refused
// with the range instead of wrapping or saturating.
FlagCheck u64_digits();

struct TrainFlag {
  std::string name;  // without the leading --
  FlagField field;
  std::string help;
  unsigned traits = 0;
  std::vector<std::string> choices = {};  // the values accepted; empty: any
  std::optional<FlagCheck> check = std::nullopt;
  std::string needs = "";  // a flag this one does nothing without: it must be given too
};

// The table, in --help order.
const std::vector<TrainFlag>& train_flags();

// The row named `name` (without --); a name not in the table is a programming error.
const TrainFlag& train_flag(std::string_view name);

// Throws fitgrad::Error "[train] --x needs --y" for the first flag given (not at its
// default) whose `needs` is not, or that only another objective reads.
void check_needs(const TrainArgs& a);
// Throws fitgrad::Error "[train] --x ..." for the first flag given (not at its default) whose
// value is not among its choices or fails its check: what the CLI refuses, for a TrainArgs
// that a program embedding the library filled in.
void check_values(const TrainArgs& a);

// The flag's value in `a` as a command line writes it (a bool as true or false).
std::string flag_text(const TrainFlag& f, const TrainArgs& a);
// The flag as command-line words that set its value in `a`: `--name`, `--name false` or
// `--name value`, the value quoted for a shell where it needs to be.
std::string flag_argument(const TrainFlag& f, const TrainArgs& a);
bool is_default(const TrainFlag& f, const TrainArgs& a);

// What the ranks of a job compare (Note [Data-parallel runs] in train/train_dist.h), an item
// each: "world size N", then "--flag value" for every flag the ranks must agree on, the device
// by its type (each rank has its own cuda:N); and those items joined.
std::vector<std::string> flags_items(const TrainArgs& a, int world_size, Device device);
std::string flags_fingerprint(const TrainArgs& a, int world_size, Device device);

// The run's arguments as trainer_state.json keeps them: every flag (a bool as 0 or 1) and
// the world size.
nlohmann::json run_arguments(const TrainArgs& a, int world_size);
// Throws fitgrad::Error naming the first flag marked kResumeKeeps whose value in `saved`
// (run_arguments of the checkpoint's run) differs from `a`'s; `checkpoint` names it.
void check_resume_keeps(const nlohmann::json& saved, const TrainArgs& a,
                        const std::string& checkpoint);

}  // namespace fitgrad::train
