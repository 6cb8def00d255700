// Byte count formatting and parsing.
#include "tensor/memory/bytes.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "tensor/error.h"

namespace fitgrad {

std::string format_bytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  const int64_t mag = bytes < 0 ? -bytes : bytes;
  if (mag < 1024) return fmt::format("{} B", bytes);
  double v = double(bytes) / 1024.0;
  int u = 0;
  while (std::fabs(v) >= 1024.0 && u < 3) {
    v /= 1024.0;
    ++u;
  }
  return fmt::format("{:.2f} {}", v, kUnits[u]);
}

uint64_t parse_bytes(std::string_view text) {
  const std::string s(text);
  const char* begin = s.c_str();
  char* end = nullptr;
  const double value = std::strtod(begin, &end);
  FG_CHECK(end != begin && std::isfinite(value) && value >= 0,
           "[memory] '{}' is not a byte size (expected e.g. 24GiB, 512MB or 1048576)", text);
  std::string unit;
  for (const char* p = end; *p; ++p)
    if (*p != ' ') unit += char(std::tolower(static_cast<unsigned char>(*p)));
  double mult = 0;
  if (unit.empty() || unit == "b")
    mult = 1;
  else if (unit == "kib" || unit == "k")
    mult = 1024.0;
  else if (unit == "mib" || unit == "m")
    mult = 1024.0 * 1024;
  else if (unit == "gib" || unit == "g")
    mult = 1024.0 * 1024 * 1024;
  else if (unit == "tib" || unit == "t")
    mult = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "kb")
    mult = 1e3;
  else if (unit == "mb")
    mult = 1e6;
  else if (unit == "gb")
    mult = 1e9;
  else if (unit == "tb")
    mult = 1e12;
  FG_CHECK(mult > 0,
           "[memory] '{}' has an unknown unit '{}' (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)",
           text, unit);
  const double bytes = value * mult;
  FG_CHECK(bytes < 1.8e19, "[memory] '{}' is too large", text);
  return uint64_t(std::llround(bytes));
}

}  // namespace fitgrad
