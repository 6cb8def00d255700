// Unicode Normalization Form C (data/nfc.h) against Python's unicodedata.normalize("NFC")
// (tests/golden/nfc_cases.json, written by gen_nfc_golden.py from the same Unicode version as
// the tables): fixed cases (reordering, singletons, exclusions, Hangul, several scripts) and
// 300 random strings of the characters NFC acts on; text already in NFC comes back as it is,
// and bytes that are not UTF-8 pass through.
#include "data/nfc.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

namespace fitgrad::data {
namespace {

TEST(Nfc, EqualsPythonsUnicodedataOnEveryCase) {
  const nlohmann::json golden =
      nlohmann::json::parse(std::ifstream(std::string(FITGRAD_GOLDEN_DIR) + "/nfc_cases.json"));
  EXPECT_EQ(golden.at("unicode").get<std::string>(), nfc_unicode_version());
  size_t changed = 0;
  for (const nlohmann::json& c : golden.at("cases")) {
    const std::string text = c.at("text"), want = c.at("nfc");
    EXPECT_EQ(nfc(text), want) << text;
    changed += want != text;
  }
  EXPECT_GT(changed, 100u);  // the cases exercise the normalizer, not only its quick check
}

TEST(Nfc, NormalizedTextAndInvalidBytesPassThrough) {
  EXPECT_EQ(nfc("already NFC: caf\xc3\xa9, \xe4\xb8\xad\xe6\x96\x87"),
            "already NFC: caf\xc3\xa9, \xe4\xb8\xad\xe6\x96\x87");
  // e + combining acute around an invalid byte: the byte ends the run, nothing composes across.
  EXPECT_EQ(nfc("e\xcc\x81\xff"
                "e\xcc\x81"),
            "\xc3\xa9\xff\xc3\xa9");
  EXPECT_EQ(nfc("e\xff\xcc\x81"), "e\xff\xcc\x81");
}

}  // namespace
}  // namespace fitgrad::data
