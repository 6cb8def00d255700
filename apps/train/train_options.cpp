// add_train_options (train_options.h): the CLI generated from the flag table.
#include "apps/train/train_options.h"

#include <type_traits>
#include <variant>

#include "train/train_flags.h"

namespace fitgrad::apps {

using train::TrainArgs;
using train::TrainFlag;

void add_train_options(CLI::App& cmd, TrainArgs& a) {
  const TrainArgs defaults;
  for (const TrainFlag& f : train::train_flags()) {
    CLI::Option* o = std::visit(
        [&](auto member) {
          auto& v = a.*member;
          using T = std::decay_t<decltype(v)>;
          // A Hugging Face style boolean: `--flag`, `--flag true`, `--flag=False`.
          if constexpr (std::is_same_v<T, bool>)
            return cmd.add_flag("--" + f.name, v, f.help)->expected(0, 1);
          else
            return cmd.add_option("--" + f.name, v, f.help);
        },
        f.field);
    if (!std::holds_alternative<bool TrainArgs::*>(f.field) &&
        !train::flag_text(f, defaults).empty())
      o->capture_default_str();
    if (!f.choices.empty()) o->check(CLI::IsMember(f.choices));
    if (f.check)
      o->check(
          CLI::Validator([e = f.check->error](std::string& s) { return e(s); }, f.check->shown));
    if (f.traits & train::kRequired) o->required();
  }
  cmd.add_option_function<double>(
         "--validation_split_percentage", [&a](double p) { a.val_fraction = p / 100; },
         "--val_fraction in percent (transformers' run_clm name)")
      ->excludes(cmd.get_option("--val_fraction"));
  cmd.get_option("--learning_rate")->each([&a](const std::string&) {
    a.learning_rate_given = true;
  });
  cmd.get_option("--beta")->each([&a](const std::string&) { a.beta_given = true; });
}

}  // namespace fitgrad::apps
