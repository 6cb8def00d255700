// transformers' tojson filter (jinja_builtins.h).
//
// Note [tojson]
// transformers replaces jinja2's tojson (which HTML-escapes) with json.dumps(x,
// ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys), and this is
// that: keys in insertion order, non-ASCII kept (four-hex-digit \u escapes with
// ensure_ascii, which is the first positional argument), only " \\ and control characters
// escaped, ", " and ": " between items and keys (",", ": " once there is an indent, which
// is a number of spaces or a string), floats as Python prints them, NaN and Infinity as
// json.dumps writes them, and dict keys that are numbers, booleans or None turned into
// strings as json.dumps does.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "data/jinja_builtins.h"
#include "data/jinja_text.h"
#include "data/utf8.h"
#include "tensor/error.h"

namespace fitgrad::data::jinja {
namespace {

Value arg_or(const Args& a, size_t i, std::string_view name, Value fallback) {
  const Value* v = a.find(i, name);
  return v ? *v : fallback;
}

struct JsonStyle {
  bool ascii = false;
  bool indented = false;
  std::string indent, item_sep = ", ", key_sep = ": ";
  bool sort_keys = false;
};

void json_string(std::string_view s, bool ascii, std::string& out) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const Utf8Char u = decode_utf8(s, i);
    const char c = s[i];
    i += u.length;
    switch (u.cp) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    char buf[16];
    if (u.cp < 0x20) {
      std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(u.cp));
      out += buf;
    } else if (ascii && u.cp >= 0x80 && u.cp != kInvalidCodePoint) {
      if (u.cp >= 0x10000) {
        const char32_t x = u.cp - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", unsigned(0xD800 + (x >> 10)),
                      unsigned(0xDC00 + (x & 0x3FF)));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(u.cp));
      }
      out += buf;
    } else if (u.cp == kInvalidCodePoint) {
      out += c;
    } else {
      append_utf8(out, u.cp);
    }
  }
  out += '"';
}

std::string json_key(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::string: return k.str();
    case Value::Kind::none: return "null";
    case Value::Kind::boolean: return k.as_bool() ? "true" : "false";
    case Value::Kind::integer: return std::to_string(k.as_int());
    case Value::Kind::real: return float_repr(k.as_real());
    default:
      throw Error(fmt::format("keys must be str, int, float, bool or None, not {}", k.type_name()));
  }
}

void json_dump(const Value& v, const JsonStyle& st, size_t depth, std::string& out) {
  const auto open = [&](char c, bool empty) {
    out += c;
    if (st.indented && !empty) {
      out += '\n';
      for (size_t i = 0; i <= depth; ++i) out += st.indent;
    }
  };
  const auto sep = [&] {
    out += st.item_sep;
    if (st.indented) {
      out += '\n';
      for (size_t i = 0; i <= depth; ++i) out += st.indent;
    }
  };
  const auto close = [&](char c, bool empty) {
    if (st.indented && !empty) {
      out += '\n';
      for (size_t i = 0; i < depth; ++i) out += st.indent;
    }
    out += c;
  };
  switch (v.kind()) {
    case Value::Kind::none: out += "null"; return;
    case Value::Kind::boolean: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::integer: out += std::to_string(v.as_int()); return;
    case Value::Kind::real: {
      const double d = v.as_real();
      out += std::isnan(d)   ? "NaN"
             : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity")
                             : float_repr(d);
      return;
    }
    case Value::Kind::string: json_string(v.str(), st.ascii, out); return;
    case Value::Kind::list: {
      FG_CHECK(v.list().type != List::Type::generator,
               "Object of type generator is not JSON serializable");
      const auto& items = v.list().items;
      open('[', items.empty());
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) sep();
        json_dump(items[i], st, depth + 1, out);
      }
      close(']', items.empty());
      return;
    }
    case Value::Kind::dict: {
      std::vector<const std::pair<Value, Value>*> kv;
      for (const auto& p : v.dict().items) kv.push_back(&p);
      if (st.sort_keys)
        std::stable_sort(kv.begin(), kv.end(),
                         [](auto* x, auto* y) { return less(x->first, y->first); });
      open('{', kv.empty());
      for (size_t i = 0; i < kv.size(); ++i) {
        if (i) sep();
        json_string(json_key(kv[i]->first), st.ascii, out);
        out += st.key_sep;
        json_dump(kv[i]->second, st, depth + 1, out);
      }
      close('}', kv.empty());
      return;
    }
    default: throw Error(fmt::format("Object of type {} is not JSON serializable", v.type_name()));
  }
}

}  // namespace

Value tojson(Renderer&, const Value& v, const Args& a) {
  a.expect("tojson", 4, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonStyle st;
  st.ascii = arg_or(a, 0, "ensure_ascii", Value::boolean(false)).truthy();
  const Value indent_arg = arg_or(a, 1, "indent", Value::none());
  if (!indent_arg.is_none()) {
    st.indented = true;
    st.item_sep.assign(1, ',');
    st.indent = indent_arg.is_string()
                    ? indent_arg.str()
                    : std::string(size_t(std::max<int64_t>(0, indent_arg.as_int())), ' ');
  }
  const Value separators = arg_or(a, 2, "separators", Value::none());
  if (!separators.is_none()) {
    const std::vector<Value> pair = iterate(separators);
    FG_CHECK(pair.size() == 2, "separators must be an (item_separator, key_separator) pair");
    st.item_sep = to_str(pair[0]);
    st.key_sep = to_str(pair[1]);
  }
  st.sort_keys = arg_or(a, 3, "sort_keys", Value::boolean(false)).truthy();
  std::string out;
  json_dump(v, st, 0, out);
  return Value::string(std::move(out));
}

}  // namespace fitgrad::data::jinja
