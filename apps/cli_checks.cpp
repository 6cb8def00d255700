// Command-line value checks (see cli_checks.h).
#include "apps/cli_checks.h"

#include <string>

#include "train/train_flags.h"

namespace fitgrad::apps {

CLI::Validator u64_digits() {
  const train::FlagCheck check = train::u64_digits();
  return CLI::Validator([e = check.error](std::string& s) { return e(s); }, check.shown);
}

}  // namespace fitgrad::apps
