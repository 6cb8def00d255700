// Byte-size formatting and parsing (used by reports and by --memory_budget).
#include "tensor/memory/bytes.h"

#include <gtest/gtest.h>

#include "tensor/error.h"

namespace fitgrad {
namespace {

TEST(Bytes, FormatUsesBinaryUnits) {
  const std::pair<int64_t, const char*> cases[] = {
      {0, "0 B"},
      {1023, "1023 B"},
      {1024, "1.00 KiB"},
      {1536, "1.50 KiB"},
      {1048576, "1.00 MiB"},
      {25769803776, "24.00 GiB"},
      {-2048, "-2.00 KiB"},
      {int64_t(3) << 40, "3.00 TiB"},
  };
  for (const auto& [bytes, text] : cases) EXPECT_EQ(format_bytes(bytes), text);
}

TEST(Bytes, ParseAcceptsUnitsAndPlainNumbers) {
  const std::pair<const char*, uint64_t> cases[] = {
      {"1048576", 1048576}, {"24GiB", uint64_t(24) << 30}, {"24 gib", uint64_t(24) << 30},
      {"1.5MiB", 1572864},  {"512MB", 512000000},          {"2G", uint64_t(2) << 30},
      {"100B", 100},        {"1TB", 1000000000000},        {"0", 0},
  };
  for (const auto& [text, bytes] : cases) EXPECT_EQ(parse_bytes(text), bytes) << text;
}

TEST(Bytes, ParseRejectsNonsenseNamingIt) {
  for (const char* bad : {"", "GiB", "-1GiB", "12 parsecs", "nan", "1e30GiB"}) {
    try {
      parse_bytes(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace fitgrad
