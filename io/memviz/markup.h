// Escaping text for HTML and SVG markup, shared by the page and the SVG of memviz.
#pragma once

#include <string>
#include <string_view>

namespace fitgrad::io {

// Escapes the five characters that markup gives meaning to, so a label or mark text
// (which a user chose) is always shown as text, in an element or an attribute.
inline std::string markup_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace fitgrad::io
