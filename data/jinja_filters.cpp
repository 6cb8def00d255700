// jinja2's filters (jinja_builtins.h), with transformers' tojson.
//
// Note [Jinja filters]
// Each filter is jinja2's, argument names and defaults included, applied to Python values:
// `length` counts code points, `default(x, true)` also replaces false values, `join` and
// `string` use str() (lists print as their repr), `int`/`float` fall back to their default
// on anything unparseable, `items` of undefined is empty. map, select, reject, selectattr,
// rejectattr, unique and reverse return generators in jinja2, and so here: they iterate and
// convert (|list, |join) as usual, but have no length and are always true in a test; map and
// the selects give nothing for a false input (none included) without looking at it.
// safe, escape and forceescape make Markup strings (Note [Markup strings] in jinja_value.cpp).
// tojson is transformers' (jinja_json.cpp).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "data/jinja_builtins.h"
#include "data/jinja_ops.h"
#include "data/jinja_text.h"
#include "data/utf8.h"
#include "tensor/error.h"

namespace fitgrad::data::jinja {
namespace {

Value arg_or(const Args& a, size_t i, std::string_view name, Value fallback) {
  const Value* v = a.find(i, name);
  return v ? *v : fallback;
}

// Python's int(text, base): optional white space and sign, a 0x/0o/0b prefix matching the
// base (any of them for base 0), digits with single underscores between them.
std::optional<int64_t> parse_int(std::string_view text, int base) {
  std::string s = py_strip(text, nullptr, true, true);
  bool negative = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) negative = s[0] == '-', s.erase(0, 1);
  if (s.size() > 2 && s[0] == '0') {
    const char p = char(s[1] | 0x20);
    const int prefixed = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (prefixed && (base == 0 || base == prefixed)) {
      base = prefixed;
      s.erase(0, 2);
      if (!s.empty() && s[0] == '_') s.erase(0, 1);
    }
  }
  if (base == 0) {
    if (s.size() > 1 && s[0] == '0' && s.find_first_not_of("0_") != std::string::npos)
      return std::nullopt;
    base = 10;
  }
  std::string digits;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (i == 0 || i + 1 == s.size() || s[i + 1] == '_') return std::nullopt;
      continue;
    }
    if (!std::isalnum(uint8_t(s[i]))) return std::nullopt;
    digits += s[i];
  }
  if (digits.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(digits.c_str(), &end, base);
  if (*end || errno == ERANGE) return std::nullopt;
  return negative ? -v : v;
}

// Python's float(text): white space around, underscores only between digits.
std::optional<double> parse_float(std::string_view text) {
  const std::string s = py_strip(text, nullptr, true, true);
  std::string clean;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (i == 0 || i + 1 == s.size() || !std::isdigit(uint8_t(s[i - 1])) ||
          !std::isdigit(uint8_t(s[i + 1])))
        return std::nullopt;
      continue;
    }
    clean += s[i];
  }
  if (clean.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(clean.c_str(), &end);
  if (*end) return std::nullopt;
  return v;
}

// jinja2's attribute paths: "a.b.0" looks up a, then b, then index 0.
Value lookup_path(const Value& item, const Value& attribute) {
  if (attribute.is_int()) return get_item(item, attribute);
  static const std::string kDot = ".";
  Value v = item;
  for (const std::string& part : py_split(to_str(attribute), &kDot, -1)) {
    const auto index = parse_int(part, 10);
    v = index && !part.empty() && std::isdigit(uint8_t(part[0]))
            ? get_item(v, Value::integer(*index))
            : get_item(v, Value::string(part));
  }
  return v;
}

// A sort key: lower-cased when it is a string and case does not matter.
Value fold(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value::string(py_lower(v.str())) : v;
}

Value length(Renderer&, const Value& v, const Args& a) {
  a.expect("length", 0, {});
  switch (v.kind()) {
    case Value::Kind::undefined: return Value::integer(0);
    case Value::Kind::string: return Value::integer(int64_t(code_point_count(v.str())));
    case Value::Kind::list:
      FG_CHECK(v.list().type != List::Type::generator, "object of type 'generator' has no len()");
      return Value::integer(int64_t(v.list().items.size()));
    case Value::Kind::dict: return Value::integer(int64_t(v.dict().items.size()));
    default: throw Error(fmt::format("object of type '{}' has no len()", v.type_name()));
  }
}

Value default_(Renderer&, const Value& v, const Args& a) {
  a.expect("default", 2, {"default_value", "boolean"});
  const Value fallback = arg_or(a, 0, "default_value", Value::string(""));
  const bool boolean = arg_or(a, 1, "boolean", Value::boolean(false)).truthy();
  return v.is_undefined() || (boolean && !v.truthy()) ? fallback : v;
}

Value trim(Renderer&, const Value& v, const Args& a) {
  a.expect("trim", 1, {"chars"});
  const Value chars = arg_or(a, 0, "chars", Value::none());
  const std::string set = chars.is_none() ? std::string() : to_str(chars);
  return Value::string(py_strip(to_str(v), chars.is_none() ? nullptr : &set, true, true));
}

Value upper(Renderer&, const Value& v, const Args& a) {
  a.expect("upper", 0, {});
  return Value::string(py_upper(to_str(v)));
}
Value lower(Renderer&, const Value& v, const Args& a) {
  a.expect("lower", 0, {});
  return Value::string(py_lower(to_str(v)));
}
Value capitalize(Renderer&, const Value& v, const Args& a) {
  a.expect("capitalize", 0, {});
  return Value::string(py_capitalize(to_str(v)));
}

// jinja2's title: each run of characters between "-", white space, "(", "{", "[" and "<"
// gets an upper-case first character and lower-case rest.
Value title(Renderer&, const Value& v, const Args& a) {
  a.expect("title", 0, {});
  const std::string s = to_str(v);
  std::string out;
  bool start = true;
  for (size_t i = 0; i < s.size();) {
    const Utf8Char u = decode_utf8(s, i);
    const std::string one = s.substr(i, u.length);
    i += u.length;
    const bool sep = one == "-" || one == "(" || one == "{" || one == "[" || one == "<" ||
                     (u.cp != kInvalidCodePoint && py_isspace(u.cp));
    out += sep ? one : start ? py_upper(one) : py_lower(one);
    start = sep;
  }
  return Value::string(std::move(out));
}

Value replace(Renderer&, const Value& v, const Args& a) {
  a.expect("replace", 3, {"old", "new", "count"});
  const Value* old = a.find(0, "old");
  const Value* with = a.find(1, "new");
  FG_CHECK(old && with, "replace needs the old and the new string");
  const Value count = arg_or(a, 2, "count", Value::none());
  return Value::string(
      py_replace(to_str(v), to_str(*old), to_str(*with), count.is_none() ? -1 : count.as_int()));
}

Value string(Renderer&, const Value& v, const Args& a) {
  a.expect("string", 0, {});
  return Value::string(to_str(v));
}

Value safe(Renderer&, const Value& v, const Args& a) {
  a.expect("safe", 0, {});
  return Value::markup(to_str(v));
}

Value escape(Renderer&, const Value& v, const Args& a) {
  a.expect("escape", 0, {});
  return v.is_markup() ? v : Value::markup(html_escape(to_str(v)));
}

Value forceescape(Renderer&, const Value& v, const Args& a) {
  a.expect("forceescape", 0, {});
  return Value::markup(html_escape(to_str(v)));
}

Value join(Renderer&, const Value& v, const Args& a) {
  a.expect("join", 2, {"d", "attribute"});
  const std::string sep = to_str(arg_or(a, 0, "d", Value::string("")));
  const Value attribute = arg_or(a, 1, "attribute", Value::none());
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first) out += sep;
    first = false;
    append_str(attribute.is_none() ? item : lookup_path(item, attribute), out);
  }
  return Value::string(std::move(out));
}

Value first(Renderer&, const Value& v, const Args& a) {
  a.expect("first", 0, {});
  const std::vector<Value> items = iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value last(Renderer&, const Value& v, const Args& a) {
  a.expect("last", 0, {});
  FG_CHECK(!(v.is_list() && v.list().type == List::Type::generator),
           "'generator' object is not reversible");
  const std::vector<Value> items = iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value list(Renderer&, const Value& v, const Args& a) {
  a.expect("list", 0, {});
  return Value::list(iterate(v));
}

Value items(Renderer&, const Value& v, const Args& a) {
  a.expect("items", 0, {});
  if (v.is_undefined()) return Value::generator({});
  FG_CHECK(v.is_dict(), "Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, x] : v.dict().items) out.push_back(Value::tuple({k, x}));
  return Value::generator(std::move(out));
}

Value dictsort(Renderer&, const Value& v, const Args& a) {
  a.expect("dictsort", 3, {"case_sensitive", "by", "reverse"});
  const bool case_sensitive = arg_or(a, 0, "case_sensitive", Value::boolean(false)).truthy();
  const std::string by = to_str(arg_or(a, 1, "by", Value::string("key")));
  const bool reverse = arg_or(a, 2, "reverse", Value::boolean(false)).truthy();
  FG_CHECK(by == "key" || by == "value", "You can only sort by either \"key\" or \"value\"");
  FG_CHECK(v.is_dict(), "dictsort needs a mapping, not {}", v.type_name());
  std::vector<std::pair<Value, Value>> kv = v.dict().items;
  std::stable_sort(kv.begin(), kv.end(), [&](const auto& x, const auto& y) {
    const Value& p = by == "key" ? x.first : x.second;
    const Value& q = by == "key" ? y.first : y.second;
    return reverse ? less(fold(q, case_sensitive), fold(p, case_sensitive))
                   : less(fold(p, case_sensitive), fold(q, case_sensitive));
  });
  std::vector<Value> out;
  for (auto& [k, x] : kv) out.push_back(Value::tuple({k, x}));
  return Value::list(std::move(out));
}

Value to_int(Renderer&, const Value& v, const Args& a) {
  a.expect("int", 2, {"default", "base"});
  const Value fallback = arg_or(a, 0, "default", Value::integer(0));
  const int64_t base = arg_or(a, 1, "base", Value::integer(10)).as_int();
  if (v.is_string()) {
    if (const auto i = parse_int(v.str(), int(base))) return Value::integer(*i);
    if (const auto f = parse_float(v.str()); f && std::isfinite(*f)) {
      FG_CHECK(std::trunc(*f) >= -0x1p63 && std::trunc(*f) < 0x1p63,
               "integer overflow (fitgrad's Jinja integers are 64-bit)");
      return Value::integer(int64_t(std::trunc(*f)));
    }
    return fallback;
  }
  if (v.is_int()) return Value::integer(v.as_int());
  if (v.is_number()) {
    // Python's int(): infinity raises OverflowError, NaN a ValueError (the default).
    const double x = std::trunc(v.as_real());
    FG_CHECK(!std::isinf(x), "cannot convert float infinity to integer");
    if (std::isnan(x)) return fallback;
    FG_CHECK(x >= -0x1p63 && x < 0x1p63, "integer overflow (fitgrad's Jinja integers are 64-bit)");
    return Value::integer(int64_t(x));
  }
  if (v.is_undefined()) throw Error(v.undefined_hint());
  return fallback;
}

Value to_float(Renderer&, const Value& v, const Args& a) {
  a.expect("float", 1, {"default"});
  const Value fallback = arg_or(a, 0, "default", Value::real(0.0));
  if (v.is_number()) return Value::real(v.as_real());
  if (v.is_string())
    if (const auto f = parse_float(v.str())) return Value::real(*f);
  if (v.is_undefined()) throw Error(v.undefined_hint());
  return fallback;
}

Value abs_(Renderer&, const Value& v, const Args& a) {
  a.expect("abs", 0, {});
  if (v.is_int()) return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
  FG_CHECK(v.is_number(), "bad operand type for abs(): '{}'", v.type_name());
  return Value::real(std::fabs(v.as_real()));
}

Value round_(Renderer&, const Value& v, const Args& a) {
  a.expect("round", 2, {"precision", "method"});
  const int64_t precision = arg_or(a, 0, "precision", Value::integer(0)).as_int();
  const std::string method = to_str(arg_or(a, 1, "method", Value::string("common")));
  FG_CHECK(method == "common" || method == "ceil" || method == "floor",
           "method must be common, ceil or floor");
  FG_CHECK(v.is_number(), "type {} doesn't define __round__ method", v.type_name());
  if (method == "common") {
    if (v.is_int()) {  // round(int, n) is an int; n < 0 rounds half to even
      if (precision >= 0) return Value::integer(v.as_int());
      const double scale = std::pow(10.0, double(-precision));
      return Value::integer(int64_t(std::nearbyint(double(v.as_int()) / scale) * scale));
    }
    if (precision < 0) {
      const double scale = std::pow(10.0, double(-precision));
      return Value::real(std::nearbyint(v.as_real() / scale) * scale);
    }
    // Python rounds the exact binary value half to even; so does printf.
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", int(std::min<int64_t>(precision, 300)), v.as_real());
    return Value::real(std::strtod(buf, nullptr));
  }
  const double scale = std::pow(10.0, double(precision));
  const double x = v.as_real() * scale;
  return Value::real((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

// select/reject/selectattr/rejectattr: kept where the test (truthiness without one) is `want`.
Value select_impl(const Value& v, const Args& a, bool by_attribute, bool want, Renderer& r) {
  if (!v.truthy()) return Value::generator({});  // jinja2 skips a false input unchecked
  size_t at = 0;
  Value attribute;
  if (by_attribute) {
    FG_CHECK(!a.positional.empty(), "Missing parameter for attribute name");
    attribute = a.positional[at++];
  }
  TestFn test = nullptr;
  Args test_args;
  if (a.positional.size() > at) {
    const std::string name = to_str(a.positional[at]);
    test = find_test(name);
    FG_CHECK(test, "No test named '{}'", name);
    test_args.positional.assign(a.positional.begin() + std::ptrdiff_t(at + 1), a.positional.end());
    test_args.named = a.named;
  }
  std::vector<Value> out;
  for (const Value& item : iterate(v)) {
    const Value x = by_attribute ? lookup_path(item, attribute) : item;
    const bool pass = test ? test(r, x, test_args) : x.truthy();
    if (pass == want) out.push_back(item);
  }
  return Value::generator(std::move(out));
}

Value select(Renderer& r, const Value& v, const Args& a) {
  return select_impl(v, a, false, true, r);
}
Value reject(Renderer& r, const Value& v, const Args& a) {
  return select_impl(v, a, false, false, r);
}
Value selectattr(Renderer& r, const Value& v, const Args& a) {
  return select_impl(v, a, true, true, r);
}
Value rejectattr(Renderer& r, const Value& v, const Args& a) {
  return select_impl(v, a, true, false, r);
}

Value map(Renderer& r, const Value& v, const Args& a) {
  std::vector<Value> out;
  if (!v.truthy()) return Value::generator({});  // jinja2 skips a false input unchecked
  if (a.positional.empty()) {
    a.expect("map", 0, {"attribute", "default"});
    const Value* attribute = a.find(0, "attribute");
    FG_CHECK(attribute, "map requires a filter argument");
    const Value fallback = arg_or(a, 1, "default", Value::none());
    for (const Value& item : iterate(v)) {
      Value x = lookup_path(item, *attribute);
      out.push_back(x.is_undefined() && !fallback.is_none() ? fallback : x);
    }
    return Value::generator(std::move(out));
  }
  const std::string name = to_str(a.positional[0]);
  const FilterFn filter = find_filter(name);
  FG_CHECK(filter, "No filter named '{}'", name);
  Args rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.named = a.named;
  for (const Value& item : iterate(v)) out.push_back(filter(r, item, rest));
  return Value::generator(std::move(out));
}

Value unique(Renderer&, const Value& v, const Args& a) {
  a.expect("unique", 2, {"case_sensitive", "attribute"});
  const bool case_sensitive = arg_or(a, 0, "case_sensitive", Value::boolean(false)).truthy();
  const Value attribute = arg_or(a, 1, "attribute", Value::none());
  std::vector<Value> out, seen;
  for (const Value& item : iterate(v)) {
    const Value key =
        fold(attribute.is_none() ? item : lookup_path(item, attribute), case_sensitive);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, key); }))
      continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return Value::generator(std::move(out));
}

Value reverse(Renderer&, const Value& v, const Args& a) {
  a.expect("reverse", 0, {});
  if (v.is_string()) return get_slice(v, Value::none(), Value::none(), Value::integer(-1));
  std::vector<Value> items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::generator(std::move(items));
}

Value sort(Renderer&, const Value& v, const Args& a) {
  a.expect("sort", 3, {"reverse", "case_sensitive", "attribute"});
  const bool reverse_ = arg_or(a, 0, "reverse", Value::boolean(false)).truthy();
  const bool case_sensitive = arg_or(a, 1, "case_sensitive", Value::boolean(false)).truthy();
  const Value attribute = arg_or(a, 2, "attribute", Value::none());
  std::vector<Value> items = iterate(v);
  const auto key = [&](const Value& x) {
    return fold(attribute.is_none() ? x : lookup_path(x, attribute), case_sensitive);
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    return reverse_ ? less(key(y), key(x)) : less(key(x), key(y));
  });
  return Value::list(std::move(items));
}

Value extreme(const Value& v, const Args& a, bool largest, const char* what) {
  a.expect(what, 2, {"case_sensitive", "attribute"});
  const bool case_sensitive = arg_or(a, 0, "case_sensitive", Value::boolean(false)).truthy();
  const Value attribute = arg_or(a, 1, "attribute", Value::none());
  const std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  const auto key = [&](const Value& x) {
    return fold(attribute.is_none() ? x : lookup_path(x, attribute), case_sensitive);
  };
  const Value* best = &items[0];
  for (const Value& x : items)
    if (largest ? less(key(*best), key(x)) : less(key(x), key(*best))) best = &x;
  return *best;
}
Value max_(Renderer&, const Value& v, const Args& a) { return extreme(v, a, true, "max"); }
Value min_(Renderer&, const Value& v, const Args& a) { return extreme(v, a, false, "min"); }

Value sum(Renderer&, const Value& v, const Args& a) {
  a.expect("sum", 2, {"attribute", "start"});
  const Value attribute = arg_or(a, 0, "attribute", Value::none());
  Value total = arg_or(a, 1, "start", Value::integer(0));
  for (const Value& x : iterate(v))
    total = arithmetic(BinOp::add, total, attribute.is_none() ? x : lookup_path(x, attribute));
  return total;
}

Value indent(Renderer&, const Value& v, const Args& a) {
  a.expect("indent", 3, {"width", "first", "blank"});
  const Value width = arg_or(a, 0, "width", Value::integer(4));
  const bool first_ = arg_or(a, 1, "first", Value::boolean(false)).truthy();
  const bool blank = arg_or(a, 2, "blank", Value::boolean(false)).truthy();
  if (!width.is_string()) check_text(size_t(std::max<int64_t>(0, width.as_int())), "indent");
  const std::string pad = width.is_string()
                              ? width.str()
                              : std::string(size_t(std::max<int64_t>(0, width.as_int())), ' ');
  const std::vector<std::string> lines = py_splitlines(to_str(v) + "\n", false);
  check_text(pad.size() * (lines.size() + 1), "indent");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += '\n';
    if (i && (blank || !lines[i].empty())) out += pad;
    out += lines[i];
  }
  return Value::string(first_ ? pad + out : out);
}

Value center(Renderer&, const Value& v, const Args& a) {
  a.expect("center", 1, {"width"});
  const std::string s = to_str(v);
  const int64_t width = arg_or(a, 0, "width", Value::integer(80)).as_int();
  const int64_t n = int64_t(code_point_count(s));
  if (width <= n) return Value::string(s);
  check_text(size_t(width), "center");
  const int64_t margin = width - n;
  const int64_t left = margin / 2 + (margin & width & 1);
  return Value::string(std::string(size_t(left), ' ') + s +
                       std::string(size_t(margin - left), ' '));
}

Value wordcount(Renderer&, const Value& v, const Args& a) {
  a.expect("wordcount", 0, {});
  const std::string s = to_str(v);
  int64_t words = 0;
  bool in_word = false;
  for (size_t i = 0; i < s.size();) {
    const Utf8Char u = decode_utf8(s, i);
    i += u.length;
    const CharClass c = char_class(u.cp);
    const bool word = c == CharClass::letter || c == CharClass::number || u.cp == '_';
    if (word && !in_word) ++words;
    in_word = word;
  }
  return Value::integer(words);
}

Value attr(Renderer&, const Value& v, const Args& a) {
  a.expect("attr", 1, {"name"});
  const Value* name = a.find(0, "name");
  FG_CHECK(name, "attr needs an attribute name");
  // getattr only: unlike obj.name, attr() never falls back to obj["name"].
  const std::string n = to_str(*name);
  if (v.is_undefined()) throw Error(v.undefined_hint());
  if (v.is_object()) return v.object().attr(n);
  if (std::optional<Value> m = method(v, n)) return *m;
  return Value::undefined(fmt::format("'{} object' has no attribute '{}'", v.type_name(), n));
}

struct NamedFilter {
  std::string_view name;
  FilterFn fn;
};

constexpr NamedFilter kFilters[] = {
    {"abs", abs_},
    {"attr", attr},
    {"capitalize", capitalize},
    {"center", center},
    {"count", length},
    {"d", default_},
    {"default", default_},
    {"dictsort", dictsort},
    {"e", escape},
    {"escape", escape},
    {"first", first},
    {"float", to_float},
    {"forceescape", forceescape},
    {"indent", indent},
    {"int", to_int},
    {"items", items},
    {"join", join},
    {"last", last},
    {"length", length},
    {"list", list},
    {"lower", lower},
    {"map", map},
    {"max", max_},
    {"min", min_},
    {"reject", reject},
    {"rejectattr", rejectattr},
    {"replace", replace},
    {"reverse", reverse},
    {"round", round_},
    {"safe", safe},
    {"select", select},
    {"selectattr", selectattr},
    {"sort", sort},
    {"string", string},
    {"sum", sum},
    {"title", title},
    {"tojson", tojson},
    {"trim", trim},
    {"unique", unique},
    {"upper", upper},
    {"wordcount", wordcount},
};

}  // namespace

FilterFn find_filter(std::string_view name) {
  for (const NamedFilter& f : kFilters)
    if (f.name == name) return f.fn;
  return nullptr;
}

}  // namespace fitgrad::data::jinja
