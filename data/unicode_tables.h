// The generated Unicode category table (data/unicode_tables.cpp, written by
// tools/gen_unicode_tables.py): code-point ranges above ASCII that are letters (\p{L})
// or numbers (\p{N}). Only data/utf8.cpp reads it; everyone else calls char_class().
#pragma once

#include <cstddef>
#include <cstdint>

namespace fitgrad::data::detail {

struct UnicodeRange {
  enum Class : uint8_t { kLetter = 1, kNumber = 2 };
  uint32_t lo, hi;  // inclusive
  Class cls;
};

extern const UnicodeRange kUnicodeRanges[];  // sorted by lo, disjoint
extern const size_t kUnicodeRangeCount;
extern const char* const kUnicodeVersion;

}  // namespace fitgrad::data::detail
