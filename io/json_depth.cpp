// The JSON nesting bound (json_depth.h, Note [JSON nesting bound]).
#include "io/json_depth.h"

#include <fmt/format.h>

#include <algorithm>

#include "tensor/error.h"

namespace fitgrad::io {

void check_json_depth(std::string_view text, std::string_view where) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == ']' || c == '}') {
      depth = std::max(0, depth - 1);
    } else if ((c == '[' || c == '{') && ++depth > kMaxJsonDepth) {
      const size_t line_start =
          text.rfind('\n', i) == std::string_view::npos ? 0 : text.rfind('\n', i) + 1;
      const size_t column = i - line_start + 1;
      const std::string place =
          text.find('\n') == std::string_view::npos
              ? fmt::format("column {}", column)
              : fmt::format("line {}, column {}",
                            1 + std::count(text.begin(), text.begin() + std::ptrdiff_t(i), '\n'),
                            column);
      throw Error(fmt::format(
          "{}{}JSON nests deeper than {} arrays and objects (at {}); fitgrad reads at most {} "
          "levels, as no real record, conversation or configuration needs more",
          where, where.empty() ? "" : " ", kMaxJsonDepth, place, kMaxJsonDepth));
    }
  }
}

}  // namespace fitgrad::io
