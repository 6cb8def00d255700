// UTF-8 decoding (strict: RFC 3629 well-formedness) and character classes for the
// pre-tokenizers. ASCII is classified by a switch; above it, white space is a fixed list
// (the White_Space property) and letters/numbers come from the generated range table.
#include "data/utf8.h"

#include <algorithm>

#include "data/unicode_tables.h"

namespace fitgrad::data {

Utf8Char decode_utf8(std::string_view text, size_t pos) {
  const auto b0 = static_cast<unsigned char>(text[pos]);
  if (b0 < 0x80) return {b0, 1};
  const Utf8Char invalid{kInvalidCodePoint, 1};
  uint32_t length = 0;
  char32_t cp = 0;
  char32_t min = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2, cp = b0 & 0x1F, min = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3, cp = b0 & 0x0F, min = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return invalid;  // a continuation byte, C0/C1 (overlong) or F5..FF
  }
  if (pos + length > text.size()) return invalid;
  for (uint32_t i = 1; i < length; ++i) {
    const auto b = static_cast<unsigned char>(text[pos + i]);
    if ((b & 0xC0) != 0x80) return invalid;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return invalid;
  return {cp, length};
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t utf8_start_before(std::string_view text, size_t end) {
  size_t pos = end - 1;
  while (pos > 0 && end - pos < 4 && (uint8_t(text[pos]) & 0xC0) == 0x80) --pos;
  return decode_utf8(text, pos).length == end - pos ? pos : end - 1;
}

bool is_valid_utf8(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char c = decode_utf8(text, pos);
    if (c.cp == kInvalidCodePoint) return false;
    pos += c.length;
  }
  return true;
}

CharClass char_class(char32_t cp) {
  if (cp < 0x80) {
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return CharClass::letter;
    if (cp >= '0' && cp <= '9') return CharClass::number;
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return CharClass::space;
    return CharClass::other;
  }
  if (cp == kInvalidCodePoint) return CharClass::other;
  switch (cp) {  // White_Space above ASCII (PropList.txt)
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000: return CharClass::space;
    default:
      if (cp >= 0x2000 && cp <= 0x200A) return CharClass::space;
  }
  using detail::kUnicodeRangeCount;
  using detail::kUnicodeRanges;
  const auto* end = kUnicodeRanges + kUnicodeRangeCount;
  // The first range whose hi >= cp; cp is in it when lo <= cp.
  const auto* it = std::lower_bound(
      kUnicodeRanges, end, cp, [](const detail::UnicodeRange& r, char32_t c) { return r.hi < c; });
  if (it == end || it->lo > cp) return CharClass::other;
  return it->cls == detail::UnicodeRange::kLetter ? CharClass::letter : CharClass::number;
}

const char* unicode_table_version() { return detail::kUnicodeVersion; }

}  // namespace fitgrad::data
