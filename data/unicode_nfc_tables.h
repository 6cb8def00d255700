// The generated tables of Unicode Normalization Form C (data/unicode_nfc_tables.cpp, written
// by tools/gen_unicode_nfc.py). Only data/nfc.cpp reads them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fitgrad::data::detail {

struct CombiningClass {
  uint32_t cp;
  uint8_t ccc;  // never 0: a code point absent from the table has class 0
};
struct Decomposition {
  uint32_t cp, first, second;  // second 0: a singleton
};
struct Composition {
  uint32_t first, second, composite;
};

extern const CombiningClass kCombiningClasses[];  // sorted by cp
extern const size_t kCombiningClassCount;
extern const Decomposition kDecompositions[];  // sorted by cp
extern const size_t kDecompositionCount;
extern const Composition kCompositions[];  // sorted by (first, second)
extern const size_t kCompositionCount;
extern const char* const kNfcUnicodeVersion;

}  // namespace fitgrad::data::detail
