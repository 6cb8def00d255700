// Python string behaviour for the Jinja engine (jinja_text.h).
//
// Note [Python text rules]
// Templates see Python str objects, sequences of code points; fitgrad keeps UTF-8 bytes and
// counts code points where Python would (length, indexes, slices, strip's character sets).
// Exact: white space (str.isspace: \t \n \v \f \r \x1c-\x1f space \x85 \xa0 \u1680
// \u2000-\u200a \u2028 \u2029 \u202f \u205f \u3000), strip/split/splitlines, repr() of
// ASCII and of printable text, float repr (shortest round trip; exponent form when the
// decimal point falls outside (-4, 16]). Approximate: case mapping covers ASCII, Latin-1,
// Latin Extended-A, Greek and Cyrillic one code point at a time (plus ß -> SS); other scripts
// keep their case, and Greek final sigma is not special. repr() escapes controls, format
// characters, separators, surrogates and private use; a code point that is unassigned in
// Python's Unicode table prints as itself where Python would escape it.
#include "data/jinja_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "data/utf8.h"

namespace fitgrad::data::jinja {
namespace {

char32_t upper_of(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  if (c == 0xB5) return 0x39C;
  if (c == 0xFF) return 0x178;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
  if (c >= 0x100 && c <= 0x17F) {
    if (c == 0x131) return 'I';
    if (c == 0x17F) return 'S';
    const bool odd_lower = (c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177);
    const bool even_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (odd_lower && (c & 1)) return c - 1;
    if (even_lower && !(c & 1)) return c - 1;
    return c;
  }
  if (c >= 0x3B1 && c <= 0x3C9) return c == 0x3C2 ? 0x3A3 : c - 32;
  if (c == 0x3AC) return 0x386;
  if (c >= 0x3AD && c <= 0x3AF) return c - 37;
  if (c == 0x3CC) return 0x38C;
  if (c == 0x3CD || c == 0x3CE) return c - 63;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}

char32_t lower_of(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c == 0x178) return 0xFF;
  if (c >= 0x100 && c <= 0x17F) {
    if (c == 0x130) return 'i';
    const bool even_upper = (c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177);
    const bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (even_upper && !(c & 1)) return c + 1;
    if (odd_upper && (c & 1)) return c + 1;
    return c;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 37;
  if (c == 0x38C) return 0x3CC;
  if (c == 0x38E || c == 0x38F) return c + 63;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

bool is_cased(char32_t c) { return upper_of(c) != c || lower_of(c) != c || c == 0xDF; }

void append_upper(char32_t c, std::string& out) {
  if (c == 0xDF) {
    out += "SS";
    return;
  }
  append_utf8(out, upper_of(c));
}

// Calls f(code point, byte offset, byte length) for each code point of s; an invalid byte is
// passed as itself (a value >= 0x80 that is not a code point of it).
template <class F>
void for_each_cp(std::string_view s, F&& f) {
  for (size_t i = 0; i < s.size();) {
    const Utf8Char u = decode_utf8(s, i);
    f(u.cp == kInvalidCodePoint ? char32_t(uint8_t(s[i])) | 0x80000000u : u.cp, i, u.length);
    i += u.length;
  }
}

void append_cp(char32_t c, std::string& out) {
  if (c & 0x80000000u)
    out += char(c & 0xFF);
  else
    append_utf8(out, c);
}

template <class F>
std::string map_cps(std::string_view s, F&& f) {
  std::string out;
  out.reserve(s.size());
  for_each_cp(s, [&](char32_t c, size_t, size_t) { f(c, out); });
  return out;
}

bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

bool printable(char32_t c) {
  if (c < 0x20 || c == 0x7F) return false;
  if (c < 0x7F) return true;
  if (c <= 0xA0 || c == 0xAD || c == 0x1680 || c == 0x180E || c == 0x61C || c == 0x6DD ||
      c == 0x70F || c == 0x3000 || c == 0xFEFF || c == 0x110BD || c == 0xE0001)
    return false;
  if ((c >= 0x600 && c <= 0x605) || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
      (c >= 0x205F && c <= 0x2064) || (c >= 0x2066 && c <= 0x206F) ||
      (c >= 0xD800 && c <= 0xF8FF) || (c >= 0xFFF9 && c <= 0xFFFB) ||
      (c >= 0xFFFE && c <= 0xFFFF) || (c >= 0x1BCA0 && c <= 0x1BCA3) ||
      (c >= 0x1D173 && c <= 0x1D17A) || (c >= 0xE0020 && c <= 0xE007F) || c >= 0xF0000)
    return false;
  return true;
}

void append_hex(std::string& out, char prefix, uint32_t value, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\%c%0*x", prefix, digits, value);
  out += buf;
}

// Whether c belongs to strip's character set (white space when there is none).
bool in_set(char32_t c, const std::vector<char32_t>* set) {
  if (!set) return py_isspace(c);
  for (const char32_t x : *set)
    if (x == c) return true;
  return false;
}

std::vector<char32_t> code_points(std::string_view s) {
  std::vector<char32_t> out;
  for_each_cp(s, [&](char32_t c, size_t, size_t) { out.push_back(c); });
  return out;
}

}  // namespace

bool py_isspace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

std::vector<size_t> code_point_offsets(std::string_view s) {
  std::vector<size_t> out;
  out.reserve(s.size() + 1);
  for_each_cp(s, [&](char32_t, size_t at, size_t) { out.push_back(at); });
  out.push_back(s.size());
  return out;
}

size_t code_point_count(std::string_view s) {
  size_t n = 0;
  for_each_cp(s, [&](char32_t, size_t, size_t) { ++n; });
  return n;
}

bool is_ascii(std::string_view s) {
  for (const char c : s)
    if (uint8_t(c) >= 0x80) return false;
  return true;
}

std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right) {
  std::vector<char32_t> set;
  if (chars) set = code_points(*chars);
  const std::vector<char32_t>* setp = chars ? &set : nullptr;
  size_t begin = 0, end = s.size();
  if (left) {
    while (begin < end) {
      const Utf8Char u = decode_utf8(s, begin);
      if (!in_set(u.cp, setp)) break;
      begin += u.length;
    }
  }
  if (right) {
    while (end > begin) {
      const size_t at = utf8_start_before(s, end);
      if (!in_set(decode_utf8(s, at).cp, setp)) break;
      end = at;
    }
  }
  return std::string(s.substr(begin, end - begin));
}

std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t at = 0;
    while (maxsplit < 0 || int64_t(out.size()) < maxsplit) {
      const size_t hit = s.find(*sep, at);
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(at, hit - at));
      at = hit + sep->size();
    }
    out.emplace_back(s.substr(at));
    return out;
  }
  size_t i = 0;
  const auto skip_space = [&] {
    while (i < s.size()) {
      const Utf8Char u = decode_utf8(s, i);
      if (!py_isspace(u.cp)) break;
      i += u.length;
    }
  };
  skip_space();
  while (i < s.size()) {
    if (maxsplit >= 0 && int64_t(out.size()) == maxsplit) {
      out.emplace_back(s.substr(i));
      break;
    }
    const size_t start = i;
    while (i < s.size()) {
      const Utf8Char u = decode_utf8(s, i);
      if (py_isspace(u.cp)) break;
      i += u.length;
    }
    out.emplace_back(s.substr(start, i - start));
    skip_space();
  }
  return out;
}

std::vector<std::string> py_rsplit(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t end = s.size();
    while (maxsplit < 0 || int64_t(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      const size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    out.emplace_back(s.substr(0, end));
    return {out.rbegin(), out.rend()};
  }
  size_t end = s.size();
  const auto skip_space = [&] {
    while (end > 0) {
      const size_t at = utf8_start_before(s, end);
      if (!py_isspace(decode_utf8(s, at).cp)) break;
      end = at;
    }
  };
  skip_space();
  while (end > 0) {
    if (maxsplit >= 0 && int64_t(out.size()) == maxsplit) {
      out.emplace_back(s.substr(0, end));
      break;
    }
    size_t start = end;
    while (start > 0) {
      const size_t at = utf8_start_before(s, start);
      if (py_isspace(decode_utf8(s, at).cp)) break;
      start = at;
    }
    out.emplace_back(s.substr(start, end - start));
    end = start;
    skip_space();
  }
  return {out.rbegin(), out.rend()};
}

std::vector<std::string> py_splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < s.size();) {
    const Utf8Char u = decode_utf8(s, i);
    if (!is_line_break(u.cp)) {
      i += u.length;
      continue;
    }
    size_t next = i + u.length;
    if (u.cp == '\r' && next < s.size() && s[next] == '\n') ++next;
    out.emplace_back(s.substr(start, (keepends ? next : i) - start));
    start = i = next;
  }
  if (start < s.size()) out.emplace_back(s.substr(start));
  return out;
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view with,
                       int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `with` before every code point and at the end.
    int64_t done = 0;
    for_each_cp(s, [&](char32_t c, size_t, size_t) {
      if (count < 0 || done < count) out += with, ++done;
      append_cp(c, out);
    });
    if (count < 0 || done < count) out += with;
    return out;
  }
  size_t at = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(old, at);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(at, hit - at));
    out += with;
    at = hit + old.size();
    ++done;
  }
  out.append(s.substr(at));
  return out;
}

std::string py_upper(std::string_view s) {
  return map_cps(s, [](char32_t c, std::string& out) {
    if (c & 0x80000000u)
      append_cp(c, out);
    else
      append_upper(c, out);
  });
}

std::string py_lower(std::string_view s) {
  return map_cps(
      s, [](char32_t c, std::string& out) { append_cp(c & 0x80000000u ? c : lower_of(c), out); });
}

std::string py_capitalize(std::string_view s) {
  bool first = true;
  return map_cps(s, [&](char32_t c, std::string& out) {
    if (c & 0x80000000u)
      append_cp(c, out);
    else if (first)
      append_upper(c, out);
    else
      append_utf8(out, lower_of(c));
    first = false;
  });
}

std::string py_title(std::string_view s) {
  bool previous_cased = false;
  return map_cps(s, [&](char32_t c, std::string& out) {
    if (c & 0x80000000u) {
      append_cp(c, out);
      previous_cased = false;
      return;
    }
    if (previous_cased)
      append_utf8(out, lower_of(c));
    else
      append_upper(c, out);
    previous_cased = is_cased(c);
  });
}

std::string py_swapcase(std::string_view s) {
  return map_cps(s, [](char32_t c, std::string& out) {
    if (c & 0x80000000u)
      append_cp(c, out);
    else if (lower_of(c) != c)
      append_utf8(out, lower_of(c));
    else
      append_upper(c, out);
  });
}

bool py_isupper(std::string_view s) {
  bool cased = false, ok = true;
  for_each_cp(s, [&](char32_t c, size_t, size_t) {
    if (c & 0x80000000u || !is_cased(c)) return;
    cased = true;
    if (upper_of(c) != c || c == 0xDF) ok = false;
  });
  return cased && ok;
}

bool py_islower(std::string_view s) {
  bool cased = false, ok = true;
  for_each_cp(s, [&](char32_t c, size_t, size_t) {
    if (c & 0x80000000u || !is_cased(c)) return;
    cased = true;
    if (lower_of(c) != c) ok = false;
  });
  return cased && ok;
}

void append_string_repr(std::string_view s, std::string& out) {
  const bool single = s.find('\'') != std::string_view::npos;
  const bool dbl = s.find('"') != std::string_view::npos;
  const char quote = single && !dbl ? '"' : '\'';
  out += quote;
  for_each_cp(s, [&](char32_t c, size_t, size_t) {
    if (c & 0x80000000u) {
      append_hex(out, 'x', c & 0xFF, 2);
    } else if (c == char32_t(quote) || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (printable(c)) {
      append_utf8(out, c);
    } else if (c < 0x100) {
      append_hex(out, 'x', c, 2);
    } else if (c < 0x10000) {
      append_hex(out, 'u', c, 4);
    } else {
      append_hex(out, 'U', c, 8);
    }
  });
  out += quote;
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string_view sci(buf, size_t(res.ptr - buf));  // "-1.25e+06", "1e-05"
  std::string out;
  size_t i = 0;
  if (sci[0] == '-') out += '-', i = 1;
  const size_t e = sci.find('e');
  std::string digits;
  for (size_t k = i; k < e; ++k)
    if (sci[k] != '.') digits += sci[k];
  const int exponent = std::stoi(std::string(sci.substr(e + 1)));
  const int point = exponent + 1;  // the value is 0.DIGITS * 10^point
  const int n = int(digits.size());
  if (point > -4 && point <= 16) {
    if (point <= 0) {
      out += "0." + std::string(size_t(-point), '0') + digits;
    } else if (point >= n) {
      out += digits + std::string(size_t(point - n), '0') + ".0";
    } else {
      out += digits.substr(0, size_t(point)) + "." + digits.substr(size_t(point));
    }
    return out;
  }
  out += digits[0];
  if (n > 1) {
    out += '.';
    out.append(digits, 1);
  }
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + ebuf;
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace fitgrad::data::jinja
