// The Jinja lexer (jinja_lexer.h).
//
// Note [Jinja whitespace control]
// transformers compiles chat templates with trim_blocks=True and lstrip_blocks=True; jinja2's
// lexer then treats the text around tags as follows, and so does this one:
//   - The source's line breaks (\r\n, \r) become \n, and one trailing \n is dropped
//     (keep_trailing_newline=False).
//   - "{%-", "{{-", "{#-": the text before the tag loses all trailing white space (Python's
//     rstrip(), newlines included).
//   - "-%}", "-}}", "-#}": all white space after the tag is skipped.
//   - trim_blocks: after "%}" or "#}" (not "}}"), one "\n" is skipped; "+%}" keeps it.
//   - lstrip_blocks: before "{%" or "{#" (not "{{"), the spaces and tabs between the start of
//     the line and the tag are removed, when nothing else stands between them. "Start of the
//     line" is a "\n" in the text before the tag, or, when that text has none, the end of
//     the previous tag if its match ended with "\n" (or the start of the template); "{%+"
//     turns it off.
//   - A raw block "{% raw %}...{% endraw %}" is text; its end tag follows the same rules,
//     its start tag skips no newline.
// "-" right after "{{" is always whitespace control, so "{{-1}}" prints 1.
#include "data/jinja_lexer.h"

#include <cerrno>
#include <cstdlib>

#include "data/jinja_text.h"
#include "data/utf8.h"
#include "tensor/error.h"

namespace fitgrad::data::jinja {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

class Lexer {
 public:
  explicit Lexer(std::string_view source) {
    src_.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_ += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_ += source[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t open = find_open(pos_);
      if (open == std::string::npos) {
        push_text(src_.substr(pos_), pos_);
        break;
      }
      const char kind = src_[open + 1];
      size_t after = open + 2;
      char sign = 0;
      if (after < src_.size() && (src_[after] == '-' || src_[after] == '+')) sign = src_[after++];
      std::string text = src_.substr(pos_, open - pos_);
      if (kind != '{') text = strip_before(std::move(text), sign);
      if (sign == '-' && kind == '{') text = py_strip(text, nullptr, false, true);
      push_text(std::move(text), pos_);
      size_t raw_end = 0;
      if (kind == '%' && raw_begin(after, raw_end)) {
        raw_block(raw_end, line_at(open));
      } else if (kind == '#') {
        comment(after, line_at(open));
      } else {
        tag(kind == '%', after, line_at(open));
      }
    }
    tokens_.push_back({Token::Type::eof, line_at(src_.size()), {}});
    return std::move(tokens_);
  }

 private:
  int line_at(size_t pos) {
    for (; line_pos_ < pos; ++line_pos_)
      if (src_[line_pos_] == '\n') ++line_;
    return line_;
  }

  [[noreturn]] void fail(size_t pos, const std::string& message) {
    throw Error(fmt::format("line {}: {}", line_at(pos), message));
  }

  size_t find_open(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    }
    return std::string::npos;
  }

  size_t skip_space(size_t i) const {
    while (i < src_.size()) {
      const Utf8Char u = decode_utf8(src_, i);
      if (!py_isspace(u.cp)) break;
      i += u.length;
    }
    return i;
  }

  // The text before a block or comment tag, after "-" or lstrip_blocks.
  std::string strip_before(std::string text, char sign) const {
    if (sign == '-') return py_strip(text, nullptr, false, true);
    if (sign == '+') return text;
    const size_t nl = text.rfind('\n');
    const size_t line_start = nl == std::string::npos ? 0 : nl + 1;
    if (line_start == 0 && !line_starting_) return text;
    if (line_start == text.size()) return text;
    for (size_t i = line_start; i < text.size();) {
      const Utf8Char u = decode_utf8(text, i);
      if (!py_isspace(u.cp)) return text;
      i += u.length;
    }
    text.resize(line_start);
    return text;
  }

  void push_text(std::string text, size_t at) {
    if (!text.empty()) tokens_.push_back({Token::Type::text, line_at(at), std::move(text)});
  }

  // The end of a block or comment tag at i ("+%}", "-%}" + white space, "%}" + one "\n").
  size_t match_end(size_t i, char closer) const {
    auto at = [&](size_t k, std::string_view s) { return src_.compare(k, s.size(), s) == 0; };
    const std::string plain{closer, '}'};
    if (at(i, "+" + plain)) return i + 3;
    if (at(i, "-" + plain)) return skip_space(i + 3);
    if (at(i, plain)) {
      const size_t end = i + 2;
      return end < src_.size() && src_[end] == '\n' ? end + 1 : end;
    }
    return 0;
  }

  void finish_tag(size_t end) {
    line_starting_ = src_[end - 1] == '\n';
    pos_ = end;
  }

  void comment(size_t from, int line) {
    for (size_t i = from; i < src_.size(); ++i) {
      if (const size_t end = match_end(i, '#')) {
        finish_tag(end);
        return;
      }
    }
    throw Error(fmt::format("line {}: missing end of comment tag", line));
  }

  // "{% raw %}" (after its "{%" and sign): sets end past it.
  bool raw_begin(size_t from, size_t& end) const {
    size_t i = skip_space(from);
    if (src_.compare(i, 3, "raw") != 0 || (i + 3 < src_.size() && is_name_char(src_[i + 3])))
      return false;
    i = skip_space(i + 3);
    if (src_.compare(i, 3, "-%}") == 0) {
      end = skip_space(i + 3);
      return true;
    }
    if (src_.compare(i, 2, "%}") == 0) {
      end = i + 2;
      return true;
    }
    return false;
  }

  void raw_block(size_t body, int line) {
    line_starting_ = src_[body - 1] == '\n';
    for (size_t open = find_open(body); open != std::string::npos; open = find_open(open + 1)) {
      if (src_[open + 1] != '%') continue;
      size_t i = open + 2;
      char sign = 0;
      if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) sign = src_[i++];
      i = skip_space(i);
      if (src_.compare(i, 6, "endraw") != 0) continue;
      i = skip_space(i + 6);
      const size_t end = match_end(i, '%');
      if (!end) continue;
      push_text(strip_before(src_.substr(body, open - body), sign), body);
      finish_tag(end);
      return;
    }
    throw Error(fmt::format("line {}: missing end of raw directive", line));
  }

  void tag(bool block, size_t from, int line) {
    tokens_.push_back({block ? Token::Type::block_begin : Token::Type::var_begin, line, {}});
    std::string balance;
    size_t i = from;
    while (true) {
      i = skip_space(i);
      if (i >= src_.size())
        throw Error(fmt::format("line {}: unexpected end of template inside a tag", line));
      if (balance.empty()) {
        size_t end = 0;
        if (block) {
          end = match_end(i, '%');
        } else if (src_.compare(i, 3, "-}}") == 0) {
          end = skip_space(i + 3);
        } else if (src_.compare(i, 2, "}}") == 0) {
          end = i + 2;
        }
        if (end) {
          tokens_.push_back(
              {block ? Token::Type::block_end : Token::Type::var_end, line_at(i), {}});
          finish_tag(end);
          return;
        }
      }
      i = token(i, balance);
    }
  }

  // One token inside a tag at i; returns the position after it.
  size_t token(size_t i, std::string& balance) {
    const int line = line_at(i);
    const char c = src_[i];
    if (is_digit(c)) return number(i, line);
    if (is_name_start(c)) {
      size_t j = i;
      while (j < src_.size() && is_name_char(src_[j])) ++j;
      tokens_.push_back({Token::Type::name, line, src_.substr(i, j - i)});
      return j;
    }
    if (c == '\'' || c == '"') return string(i, line);
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const std::string_view op : kTwo) {
      if (src_.compare(i, 2, op) == 0) {
        tokens_.push_back({Token::Type::op, line, std::string(op)});
        return i + 2;
      }
    }
    static constexpr std::string_view kOne = "+-/*%~[](){}><=.:|,;";
    if (kOne.find(c) == std::string_view::npos) fail(i, fmt::format("unexpected char '{}'", c));
    if (c == '(' || c == '[' || c == '{') balance += c == '(' ? ')' : c == '[' ? ']' : '}';
    if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) fail(i, fmt::format("unexpected '{}'", c));
      if (balance.back() != c)
        fail(i, fmt::format("unexpected '{}', expected '{}'", c, balance.back()));
      balance.pop_back();
    }
    tokens_.push_back({Token::Type::op, line, std::string(1, c)});
    return i + 1;
  }

  size_t digits(size_t i, bool (*ok)(char)) const {
    while (i < src_.size() &&
           (ok(src_[i]) || (src_[i] == '_' && i + 1 < src_.size() && ok(src_[i + 1]))))
      ++i;
    return i;
  }

  size_t number(size_t i, int line) {
    const auto clean = [&](size_t a, size_t b) {
      std::string s;
      for (size_t k = a; k < b; ++k)
        if (src_[k] != '_') s += src_[k];
      return s;
    };
    if (src_[i] == '0' && i + 2 < src_.size()) {
      const char p = char(src_[i + 1] | 0x20);
      const int base = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
      if (base) {
        size_t j = i + 2;
        while (j < src_.size() && (is_hex(src_[j]) || src_[j] == '_')) ++j;
        const std::string body = clean(i + 2, j);
        char* end = nullptr;
        const long long v = std::strtoll(body.c_str(), &end, base);
        if (body.empty() || *end) fail(i, "invalid number literal");
        tokens_.push_back({Token::Type::integer, line, {}, v});
        return j;
      }
    }
    size_t j = digits(i, is_digit);
    bool real = false;
    if (j + 1 < src_.size() && src_[j] == '.' && is_digit(src_[j + 1])) {
      j = digits(j + 1, is_digit);
      real = true;
    }
    if (j < src_.size() && (src_[j] == 'e' || src_[j] == 'E')) {
      size_t k = j + 1;
      if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
      if (k < src_.size() && is_digit(src_[k])) {
        j = digits(k, is_digit);
        real = true;
      }
    }
    const std::string text = clean(i, j);
    if (real) {
      tokens_.push_back({Token::Type::real, line, {}, 0, std::strtod(text.c_str(), nullptr)});
    } else {
      errno = 0;
      const long long v = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) fail(i, "integer literal " + text + " does not fit in 64 bits");
      tokens_.push_back({Token::Type::integer, line, {}, v});
    }
    return j;
  }

  // A quoted string with Python's escapes (jinja2 decodes them as "unicode-escape").
  size_t string(size_t i, int line) {
    const char quote = src_[i];
    std::string out;
    size_t j = i + 1;
    const auto hex = [&](size_t at, int n) -> char32_t {
      if (at + size_t(n) > src_.size()) fail(at, "truncated escape in a string");
      char32_t v = 0;
      for (int k = 0; k < n; ++k) {
        const char h = src_[at + size_t(k)];
        if (!is_hex(h)) fail(at, "truncated escape in a string");
        v = v * 16 + char32_t(is_digit(h) ? h - '0' : (h | 0x20) - 'a' + 10);
      }
      return v;
    };
    while (true) {
      if (j >= src_.size()) fail(i, "unterminated string");
      const char c = src_[j];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        ++j;
        continue;
      }
      if (j + 1 >= src_.size()) fail(i, "unterminated string");
      const char e = src_[j + 1];
      j += 2;
      switch (e) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x': append_utf8(out, hex(j, 2)), j += 2; break;
        case 'u': append_utf8(out, hex(j, 4)), j += 4; break;
        case 'U': {
          const char32_t cp = hex(j, 8);
          if (cp > 0x10FFFF) fail(j, "illegal Unicode character in a string");
          append_utf8(out, cp);
          j += 8;
          break;
        }
        case 'N': fail(j, "\\N{...} escapes are not supported");
        default:
          if (e >= '0' && e <= '7') {
            char32_t v = char32_t(e - '0');
            for (int k = 0; k < 2 && j < src_.size() && src_[j] >= '0' && src_[j] <= '7'; ++k)
              v = v * 8 + char32_t(src_[j++] - '0');
            append_utf8(out, v);
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    tokens_.push_back({Token::Type::string, line, std::move(out)});
    return j + 1;
  }

  std::string src_;
  size_t pos_ = 0;
  bool line_starting_ = true;
  int line_ = 1;
  size_t line_pos_ = 0;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace fitgrad::data::jinja
