// UTF-8 decoding and the character classes the pre-tokenizers need. decode_utf8 never
// fails: a byte that does not start a well-formed sequence (stray continuation, overlong
// form, surrogate, beyond U+10FFFF, truncated) decodes as one "invalid" unit of length 1,
// so tokenizers can split and round-trip arbitrary bytes (Note [Invalid UTF-8] in
// data/pretokenizer.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fitgrad::data {

// One decoded unit of a byte string.
struct Utf8Char {
  char32_t cp;      // the code point; kInvalidCodePoint for an invalid byte
  uint32_t length;  // bytes consumed, 1..4
};

inline constexpr char32_t kInvalidCodePoint = 0xFFFFFFFF;

// Decodes the character that starts at text[pos] (pos < text.size()).
Utf8Char decode_utf8(std::string_view text, size_t pos);

// Appends cp's UTF-8 encoding to out (cp must be a Unicode scalar value).
void append_utf8(std::string& out, char32_t cp);

// Whether the whole string is well-formed UTF-8.
bool is_valid_utf8(std::string_view text);

// Where the unit that ends at text[end - 1] starts (0 < end <= text.size()): the start of
// a well-formed character, else end - 1 (an invalid byte).
size_t utf8_start_before(std::string_view text, size_t end);

// The classes of GPT-2-style pre-tokenization patterns: \p{L}, \p{N}, \s (the Unicode
// White_Space property), and everything else. An invalid byte is `other`.
enum class CharClass : uint8_t { other, letter, number, space };

CharClass char_class(char32_t cp);

// The Unicode version of the letter/number table (tools/gen_unicode_tables.py).
const char* unicode_table_version();

}  // namespace fitgrad::data
