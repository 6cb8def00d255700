// The flag table (Note [One flag table] in train/train_flags.h): every option `fitgrad
// train` registers is a row of it, and each thing generated from it covers exactly the rows
// marked for it. Each row is changed in turn, the way a user would change one flag: the
// ranks' configuration hash sees a change of every flag the ranks must agree on and no other;
// a resume refuses a change of every flag it keeps and no other; and memplan's command line
// carries every flag it is meant to, parsing back into the same values.
#include "train/train_flags.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "apps/memplan/search.h"
#include "apps/train/train_options.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::apps {

using train::check_resume_keeps;
using train::check_values;
using train::flag_text;
using train::flags_fingerprint;
using train::kPlanLine;
using train::kRanksAgree;
using train::kResumeKeeps;
using train::run_arguments;
using train::train_flags;
using train::TrainArgs;
using train::TrainFlag;
namespace {

// `a` with flag `f` set to another value that train accepts: a bool flipped, a number
// moved, a string given another of its choices or one more character.
TrainArgs changed(const TrainFlag& f, TrainArgs a) {
  std::visit(
      [&](auto member) {
        auto& v = a.*member;
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          v = !v;
        } else if constexpr (std::is_same_v<T, std::string>) {
          if (f.choices.empty()) {
            v += "x";
          } else {
            for (const std::string& c : f.choices)
              if (c != v) {
                v = c;
                break;
              }
          }
        } else if constexpr (std::is_same_v<T, double>) {
          v = v / 2 + 0.25;
        } else {
          v += 1;
        }
      },
      f.field);
  return a;
}

TEST(TrainFlags, EveryRegisteredOptionIsARowAndEveryRowIsRegistered) {
  CLI::App app;
  TrainArgs a;
  add_train_options(app, a);
  std::set<std::string> rows;
  for (const TrainFlag& f : train_flags()) {
    EXPECT_TRUE(rows.insert(f.name).second) << f.name << " is in the table twice";
    EXPECT_NE(app.get_option_no_throw("--" + f.name), nullptr) << f.name;
    EXPECT_FALSE(f.help.empty()) << f.name;
  }
  // An alias is the one option that is not a row: it sets --val_fraction in percent.
  const std::set<std::string> aliases = {"--validation_split_percentage", "--help"};
  for (const CLI::Option* o : app.get_options()) {
    const std::string name = o->get_name();
    if (aliases.count(name)) continue;
    EXPECT_TRUE(name.starts_with("--") && rows.count(name.substr(2))) << name;
  }
  // Issue 43, finding 8: the three flags the ranks' check once left out.
  for (const TrainFlag& f : train_flags())
    if (f.name == "optim_target_modules" || f.name.starts_with("bnb_4bit_")) {
      EXPECT_TRUE(f.traits & kRanksAgree) << f.name;
    }
}

// A program that fills TrainArgs itself (Note [The run as a library] in train/trainer.h) gets
// the refusals a user gets from the command line: for every row with choices or a check, a
// few values are typed at the CLI and set directly, and check_values refuses exactly those
// the CLI refused, naming the flag.
TEST(TrainFlags, TheLibraryRefusesTheValuesTheCliRefuses) {
  int refused = 0;
  for (const TrainFlag& f : train_flags()) {
    if (!f.check && f.choices.empty()) continue;
    const std::vector<std::string> tries =
        f.choices.empty() ? std::vector<std::string>{"-1", "0", "0.25", "0.5", "2", "3", "1e30"}
                          : std::vector<std::string>{f.choices.front(), f.choices.back(), "bogus"};
    for (const std::string& text : tries) {
      if (text.empty()) continue;  // a command line cannot type it
      TrainArgs direct;
      // The value set as a program would; skipped where the field's type cannot hold it.
      const bool holds = std::visit(
          [&](auto member) {
            auto& v = direct.*member;
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::string>) {
              v = text;
              return true;
            } else if constexpr (std::is_same_v<T, bool>) {
              return false;
            } else {
              const double d = std::stod(text);
              if (std::is_integral_v<T> && (d != std::floor(d) || std::abs(d) > 1e9)) return false;
              if (std::is_unsigned_v<T> && d < 0) return false;
              v = T(d);
              return true;
            }
          },
          f.field);
      if (!holds) continue;
      CLI::App app;
      TrainArgs parsed;
      add_train_options(app, parsed);
      bool cli_accepts = true;
      try {
        app.parse("--output_dir out --" + f.name + " " + text, false);
      } catch (const CLI::ParseError&) {
        cli_accepts = false;
      }
      if (cli_accepts) {
        EXPECT_NO_THROW(check_values(direct)) << "--" << f.name << " " << text;
      } else {
        ++refused;
        fitgrad::testing::expect_error([&] { check_values(direct); }, "[train] --" + f.name);
      }
    }
  }
  EXPECT_GE(refused, 8);  // every kind of check refused something
}

// A positive number is a finite one: --beta inf would make every loss NaN, as --beta nan does.
TEST(TrainFlags, APositiveNumberRefusesInfinityAsNan) {
  for (const std::string text : {"inf", "-inf", "nan", "1e400"}) {
    CLI::App app;
    TrainArgs parsed;
    add_train_options(app, parsed);
    EXPECT_THROW(app.parse("--output_dir out --beta " + text, false), CLI::ParseError) << text;
    TrainArgs direct;
    direct.beta = std::strtod(text.c_str(), nullptr);
    fitgrad::testing::expect_error([&] { check_values(direct); }, "[train] --beta",
                                   "must be a positive finite number");
  }
}

TEST(TrainFlags, TheRanksCheckCoversEveryFlagMarkedSoAndNoOther) {
  const TrainArgs a;
  const std::string base = flags_fingerprint(a, 2, Device::cpu());
  int agreed = 0;
  for (const TrainFlag& f : train_flags()) {
    const std::string other = flags_fingerprint(changed(f, a), 2, Device::cpu());
    if (f.traits & kRanksAgree) {
      ++agreed;
      EXPECT_NE(other, base) << "--" << f.name << " differs between ranks unnoticed";
    } else {
      EXPECT_EQ(other, base) << "--" << f.name << " is a rank's own, yet compared";
    }
  }
  EXPECT_GT(agreed, 70);
  EXPECT_NE(flags_fingerprint(a, 3, Device::cpu()), base);  // the world size
}

TEST(TrainFlags, AResumeRefusesAChangeOfEveryFlagItKeepsAndNoOther) {
  const TrainArgs a;
  const nlohmann::json saved = run_arguments(a, 1);
  for (const TrainFlag& f : train_flags()) {
    ASSERT_TRUE(saved.contains(f.name)) << f.name;
    const TrainArgs now = changed(f, a);
    if (f.traits & kResumeKeeps) {
      testing::expect_error([&] { check_resume_keeps(saved, now, "ckpt"); },
                            "[train] --resume_from_checkpoint ckpt: --" + f.name + " was ");
    } else {
      EXPECT_NO_THROW(check_resume_keeps(saved, now, "ckpt")) << f.name;
    }
  }
  // A checkpoint from before a flag existed has no value for it, and keeps none.
  nlohmann::json older = saved;
  older.erase("weight_group_size");
  TrainArgs now = a;
  now.weight_group_size = 128;
  EXPECT_NO_THROW(check_resume_keeps(older, now, "ckpt"));
}

TEST(TrainFlags, MemplansLineCarriesEveryPlanFlagAndParsesBackToTheSameValues) {
  for (const TrainFlag& f : train_flags()) {
    if (!(f.traits & kPlanLine)) continue;
    const TrainArgs planned = changed(f, TrainArgs());
    const std::string flags = setting_flags(planned);
    EXPECT_NE(flags.find("--" + f.name), std::string::npos) << f.name << ": " << flags;
    CLI::App app;
    TrainArgs parsed;
    add_train_options(app, parsed);
    ASSERT_NO_THROW(app.parse(flags + " --output_dir out", false)) << flags;
    for (const TrainFlag& g : train_flags())
      if (g.traits & kPlanLine) {
        EXPECT_EQ(flag_text(g, parsed), flag_text(g, planned)) << g.name << " from " << flags;
      }
  }
  // A value a shell would split is quoted.
  TrainArgs a;
  a.optim = "apollo";
  a.optim_target_modules = ".*(q|v)_proj$";
  EXPECT_NE(setting_flags(a).find("--optim_target_modules '.*(q|v)_proj$'"), std::string::npos)
      << setting_flags(a);
}

}  // namespace
}  // namespace fitgrad::apps
