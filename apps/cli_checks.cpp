// Command-line value checks (see cli_checks.h).
#include "apps/cli_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tensor/error.h"

namespace fitgrad::apps {
namespace {

std::string check_u64_digits(const std::string& text) {
  const std::string max = "18446744073709551615";
  const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
  const std::string trimmed =
      digits ? text.substr(std::min(text.find_first_not_of('0'), text.size() - 1)) : text;
  if (!digits || trimmed.size() > max.size() || (trimmed.size() == max.size() && trimmed > max))
    return fmt::format("must be an integer in [0, {}], got '{}'", max, text);
  return "";
}

}  // namespace

CLI::Validator u64_digits() { return CLI::Validator(check_u64_digits, "UINT64"); }

std::string read_whole_file(const char* command, const char* what, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  FG_CHECK(in.good() && std::filesystem::is_regular_file(path), "[{}] cannot open the {} '{}'",
           command, what, path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace fitgrad::apps
