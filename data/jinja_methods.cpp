// The Python str, dict and list methods chat templates call (jinja_builtins.h; Note [Jinja
// methods] in jinja_builtins.cpp).
#include <algorithm>
#include <optional>

#include "data/jinja_builtins.h"
#include "data/jinja_text.h"
#include "data/utf8.h"
#include "tensor/error.h"

namespace fitgrad::data::jinja {
namespace {

enum : uint8_t { kStr = 1, kDict = 2, kList = 4, kTuple = 8 };

uint8_t kind_bit(const Value& v) {
  if (v.is_string()) return kStr;
  if (v.is_dict()) return kDict;
  if (v.is_list() && v.list().type == List::Type::list) return kList;
  if (v.is_list() && v.list().type == List::Type::tuple) return kTuple;
  return 0;
}

Value arg_or(const Args& a, size_t i, std::string_view name, Value fallback) {
  const Value* v = a.find(i, name);
  return v ? *v : fallback;
}

std::string str_of(const Value& v, std::string_view what) {
  FG_CHECK(v.is_string(), "{} argument must be str, not {}", what, v.type_name());
  return v.str();
}

const Value& required(const Args& a, size_t i, std::string_view what) {
  FG_CHECK(i < a.positional.size(), "{} takes at least {} argument(s)", what, i + 1);
  return a.positional[i];
}

// chars/sep arguments that may be None.
std::optional<std::string> optional_str(const Args& a, size_t i, std::string_view name,
                                        std::string_view what) {
  const Value v = arg_or(a, i, name, Value::none());
  if (v.is_none()) return std::nullopt;
  return str_of(v, what);
}

Value strip_impl(const Value& s, const Args& a, bool left, bool right, std::string_view what) {
  a.expect(what, 1, {"chars"});
  const auto chars = optional_str(a, 0, "chars", what);
  return Value::string(py_strip(s.str(), chars ? &*chars : nullptr, left, right));
}
Value strip(const Value& s, const Args& a) { return strip_impl(s, a, true, true, "str.strip"); }
Value lstrip(const Value& s, const Args& a) { return strip_impl(s, a, true, false, "str.lstrip"); }
Value rstrip(const Value& s, const Args& a) { return strip_impl(s, a, false, true, "str.rstrip"); }

Value strings(const std::vector<std::string>& parts) {
  std::vector<Value> out;
  out.reserve(parts.size());
  for (const std::string& p : parts) out.push_back(Value::string(p));
  return Value::list(std::move(out));
}

Value split_impl(const Value& s, const Args& a, bool from_right) {
  const char* what = from_right ? "str.rsplit" : "str.split";
  a.expect(what, 2, {"sep", "maxsplit"});
  const auto sep = optional_str(a, 0, "sep", what);
  FG_CHECK(!sep || !sep->empty(), "empty separator");
  const int64_t maxsplit = arg_or(a, 1, "maxsplit", Value::integer(-1)).as_int();
  const std::string* sp = sep ? &*sep : nullptr;
  return strings(from_right ? py_rsplit(s.str(), sp, maxsplit) : py_split(s.str(), sp, maxsplit));
}
Value split(const Value& s, const Args& a) { return split_impl(s, a, false); }
Value rsplit(const Value& s, const Args& a) { return split_impl(s, a, true); }

Value splitlines(const Value& s, const Args& a) {
  a.expect("str.splitlines", 1, {"keepends"});
  return strings(py_splitlines(s.str(), arg_or(a, 0, "keepends", Value::boolean(false)).truthy()));
}

Value affix_impl(const Value& s, const Args& a, bool prefix) {
  const char* what = prefix ? "str.startswith" : "str.endswith";
  a.expect(what, 1, {});
  const Value& want = required(a, 0, what);
  const auto hit = [&](const Value& x) {
    const std::string p = str_of(x, what);
    return prefix ? s.str().starts_with(p) : s.str().ends_with(p);
  };
  if (want.is_list() && want.list().type == List::Type::tuple)
    return Value::boolean(std::any_of(want.list().items.begin(), want.list().items.end(), hit));
  return Value::boolean(hit(want));
}
Value startswith(const Value& s, const Args& a) { return affix_impl(s, a, true); }
Value endswith(const Value& s, const Args& a) { return affix_impl(s, a, false); }

template <std::string (*F)(std::string_view)>
Value text_map(const Value& s, const Args& a) {
  a.expect("str method", 0, {});
  return Value::string(F(s.str()));
}

Value replace(const Value& s, const Args& a) {
  a.expect("str.replace", 3, {"count"});
  const std::string old = str_of(required(a, 0, "str.replace"), "str.replace");
  const std::string with = str_of(required(a, 1, "str.replace"), "str.replace");
  const int64_t count = arg_or(a, 2, "count", Value::integer(-1)).as_int();
  return Value::string(py_replace(s.str(), old, with, count));
}

// The code point index of byte offset `at`.
int64_t cp_index(const std::string& s, size_t at) {
  return int64_t(code_point_count(std::string_view(s).substr(0, at)));
}

Value find_impl(const Value& s, const Args& a, bool from_right, bool must, const char* what) {
  a.expect(what, 1, {});
  const std::string sub = str_of(required(a, 0, what), what);
  const size_t at = from_right ? s.str().rfind(sub) : s.str().find(sub);
  if (at == std::string::npos) {
    FG_CHECK(!must, "substring not found");
    return Value::integer(-1);
  }
  return Value::integer(cp_index(s.str(), at));
}
Value find(const Value& s, const Args& a) { return find_impl(s, a, false, false, "str.find"); }
Value rfind(const Value& s, const Args& a) { return find_impl(s, a, true, false, "str.rfind"); }
Value str_index(const Value& s, const Args& a) { return find_impl(s, a, false, true, "str.index"); }
Value rindex(const Value& s, const Args& a) { return find_impl(s, a, true, true, "str.rindex"); }

Value str_count(const Value& s, const Args& a) {
  a.expect("str.count", 1, {});
  const std::string sub = str_of(required(a, 0, "str.count"), "str.count");
  if (sub.empty()) return Value::integer(int64_t(code_point_count(s.str())) + 1);
  int64_t n = 0;
  for (size_t at = s.str().find(sub); at != std::string::npos;
       at = s.str().find(sub, at + sub.size()))
    ++n;
  return Value::integer(n);
}

Value join(const Value& s, const Args& a) {
  a.expect("str.join", 1, {});
  std::string out;
  size_t i = 0;
  for (const Value& item : iterate(required(a, 0, "str.join"))) {
    FG_CHECK(item.is_string(), "sequence item {}: expected str instance, {} found", i,
             item.type_name());
    if (i++) out += s.str();
    out += item.str();
  }
  return Value::string(std::move(out));
}

template <bool (*P)(char32_t)>
Value all_chars(const Value& s, const Args& a) {
  a.expect("str method", 0, {});
  const std::string& t = s.str();
  if (t.empty()) return Value::boolean(false);
  for (size_t i = 0; i < t.size();) {
    const Utf8Char u = decode_utf8(t, i);
    if (!P(u.cp)) return Value::boolean(false);
    i += u.length;
  }
  return Value::boolean(true);
}
bool is_digit_cp(char32_t c) { return char_class(c) == CharClass::number; }
bool is_alpha_cp(char32_t c) { return char_class(c) == CharClass::letter; }
bool is_alnum_cp(char32_t c) { return is_digit_cp(c) || is_alpha_cp(c); }

Value isupper(const Value& s, const Args&) { return Value::boolean(py_isupper(s.str())); }
Value islower(const Value& s, const Args&) { return Value::boolean(py_islower(s.str())); }

Value remove_affix(const Value& s, const Args& a, bool prefix) {
  a.expect("str.removeprefix", 1, {});
  const std::string x = str_of(required(a, 0, "str.removeprefix"), "str.removeprefix");
  const std::string& t = s.str();
  if (prefix && t.starts_with(x)) return Value::string(t.substr(x.size()));
  if (!prefix && !x.empty() && t.ends_with(x))
    return Value::string(t.substr(0, t.size() - x.size()));
  return s;
}
Value removeprefix(const Value& s, const Args& a) { return remove_affix(s, a, true); }
Value removesuffix(const Value& s, const Args& a) { return remove_affix(s, a, false); }

Value pad_impl(const Value& s, const Args& a, int where) {  // -1 ljust, 0 center, 1 rjust
  a.expect("str padding", 2, {});
  const int64_t width = required(a, 0, "str padding").as_int();
  const std::string fill = a.positional.size() > 1 ? str_of(a.positional[1], "fillchar") : " ";
  FG_CHECK(code_point_count(fill) == 1, "The fill character must be exactly one character long");
  const int64_t n = int64_t(code_point_count(s.str()));
  if (width <= n) return s;
  check_text(size_t(width - n) * fill.size() + s.str().size(), "padding a string");
  const int64_t margin = width - n;
  const int64_t left = where < 0 ? 0 : where > 0 ? margin : margin / 2 + (margin & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s.str();
  for (int64_t i = left; i < margin; ++i) out += fill;
  return Value::string(std::move(out));
}
Value ljust(const Value& s, const Args& a) { return pad_impl(s, a, -1); }
Value center(const Value& s, const Args& a) { return pad_impl(s, a, 0); }
Value rjust(const Value& s, const Args& a) { return pad_impl(s, a, 1); }

Value partition_impl(const Value& s, const Args& a, bool from_right) {
  a.expect("str.partition", 1, {});
  const std::string sep = str_of(required(a, 0, "str.partition"), "str.partition");
  FG_CHECK(!sep.empty(), "empty separator");
  const std::string& t = s.str();
  const size_t at = from_right ? t.rfind(sep) : t.find(sep);
  if (at == std::string::npos) {
    return from_right ? Value::tuple({Value::string(""), Value::string(""), s})
                      : Value::tuple({s, Value::string(""), Value::string("")});
  }
  return Value::tuple({Value::string(t.substr(0, at)), Value::string(sep),
                       Value::string(t.substr(at + sep.size()))});
}
Value partition(const Value& s, const Args& a) { return partition_impl(s, a, false); }
Value rpartition(const Value& s, const Args& a) { return partition_impl(s, a, true); }

// str.format with "{}", "{0}", "{name}", "{{" and "}}"; conversions and format specs are
// refused rather than approximated.
Value format(const Value& s, const Args& a) {
  const std::string& t = s.str();
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (c == '}') {
      FG_CHECK(i + 1 < t.size() && t[i + 1] == '}', "Single '}}' encountered in format string");
      out += '}';
      ++i;
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < t.size() && t[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = t.find('}', i);
    FG_CHECK(close != std::string::npos, "Single '{{' encountered in format string");
    const std::string field = t.substr(i + 1, close - i - 1);
    FG_CHECK(field.find_first_of("!:[.") == std::string::npos,
             "str.format field '{{{}}}' uses a conversion, spec or lookup, which is not supported",
             field);
    if (field.empty()) {
      FG_CHECK(auto_index < a.positional.size(), "Replacement index {} out of range", auto_index);
      append_str(a.positional[auto_index++], out);
    } else if (std::all_of(field.begin(), field.end(),
                           [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t k = size_t(std::stoul(field));
      FG_CHECK(k < a.positional.size(), "Replacement index {} out of range", k);
      append_str(a.positional[k], out);
    } else {
      const Value* v = a.find(SIZE_MAX, field);
      FG_CHECK(v, "KeyError: '{}'", field);
      append_str(*v, out);
    }
    i = close;
  }
  return Value::string(std::move(out));
}

Value dict_get(const Value& d, const Args& a) {
  a.expect("dict.get", 2, {});
  const Value* v = d.dict().find(required(a, 0, "dict.get"));
  return v ? *v : (a.positional.size() > 1 ? a.positional[1] : Value::none());
}

Value dict_items(const Value& d, const Args& a) {
  a.expect("dict.items", 0, {});
  std::vector<Value> out;
  for (const auto& [k, v] : d.dict().items) out.push_back(Value::tuple({k, v}));
  return Value::list(std::move(out));
}
Value dict_keys(const Value& d, const Args& a) {
  a.expect("dict.keys", 0, {});
  return Value::list(iterate(d));
}
Value dict_values(const Value& d, const Args& a) {
  a.expect("dict.values", 0, {});
  std::vector<Value> out;
  for (const auto& kv : d.dict().items) out.push_back(kv.second);
  return Value::list(std::move(out));
}
Value copy(const Value& v, const Args& a) {
  a.expect("copy", 0, {});
  if (v.is_dict()) return Value::dict(std::make_shared<Dict>(v.dict()));
  return Value::list(v.list().items);
}

Value list_index(const Value& l, const Args& a) {
  a.expect("index", 1, {});
  const Value& x = required(a, 0, "index");
  const auto& items = l.list().items;
  for (size_t i = 0; i < items.size(); ++i)
    if (equal(items[i], x)) return Value::integer(int64_t(i));
  throw Error(fmt::format("{} is not in list", to_str(x)));
}
Value list_count(const Value& l, const Args& a) {
  a.expect("count", 1, {});
  const Value& x = required(a, 0, "count");
  return Value::integer(int64_t(std::count_if(l.list().items.begin(), l.list().items.end(),
                                              [&](const Value& v) { return equal(v, x); })));
}
Value str_or_list_count(const Value& v, const Args& a) {
  return v.is_string() ? str_count(v, a) : list_count(v, a);
}
Value str_or_list_index(const Value& v, const Args& a) {
  return v.is_string() ? str_index(v, a) : list_index(v, a);
}

std::string casefold(std::string_view s) { return py_lower(s); }

struct NamedMethod {
  uint8_t kinds;
  std::string_view name;
  Value (*fn)(const Value& self, const Args& args);
};

constexpr NamedMethod kMethods[] = {
    {kStr, "strip", strip},
    {kStr, "lstrip", lstrip},
    {kStr, "rstrip", rstrip},
    {kStr, "split", split},
    {kStr, "rsplit", rsplit},
    {kStr, "splitlines", splitlines},
    {kStr, "startswith", startswith},
    {kStr, "endswith", endswith},
    {kStr, "upper", text_map<py_upper>},
    {kStr, "lower", text_map<py_lower>},
    {kStr, "title", text_map<py_title>},
    {kStr, "capitalize", text_map<py_capitalize>},
    {kStr, "swapcase", text_map<py_swapcase>},
    {kStr, "casefold", text_map<casefold>},
    {kStr, "replace", replace},
    {kStr, "find", find},
    {kStr, "rfind", rfind},
    {kStr | kList | kTuple, "index", str_or_list_index},
    {kStr, "rindex", rindex},
    {kStr | kList | kTuple, "count", str_or_list_count},
    {kStr, "join", join},
    {kStr, "isdigit", all_chars<is_digit_cp>},
    {kStr, "isnumeric", all_chars<is_digit_cp>},
    {kStr, "isdecimal", all_chars<is_digit_cp>},
    {kStr, "isalpha", all_chars<is_alpha_cp>},
    {kStr, "isalnum", all_chars<is_alnum_cp>},
    {kStr, "isspace", all_chars<py_isspace>},
    {kStr, "isupper", isupper},
    {kStr, "islower", islower},
    {kStr, "removeprefix", removeprefix},
    {kStr, "removesuffix", removesuffix},
    {kStr, "ljust", ljust},
    {kStr, "center", center},
    {kStr, "rjust", rjust},
    {kStr, "partition", partition},
    {kStr, "rpartition", rpartition},
    {kStr, "format", format},
    {kDict, "get", dict_get},
    {kDict, "items", dict_items},
    {kDict, "keys", dict_keys},
    {kDict, "values", dict_values},
    {kDict | kList, "copy", copy},
};

// What ImmutableSandboxedEnvironment refuses.
constexpr std::string_view kModifying[] = {"append",  "extend",     "insert", "pop",
                                           "remove",  "reverse",    "sort",   "clear",
                                           "popitem", "setdefault", "update"};

}  // namespace

bool is_method_name(std::string_view name) {
  return std::any_of(std::begin(kMethods), std::end(kMethods),
                     [&](const NamedMethod& m) { return m.name == name; }) ||
         std::find(std::begin(kModifying), std::end(kModifying), name) != std::end(kModifying);
}

std::optional<Value> method(const Value& self, std::string_view name) {
  const uint8_t bit = kind_bit(self);
  for (const NamedMethod& m : kMethods) {
    if (!(m.kinds & bit) || m.name != name) continue;
    auto fn = m.fn;
    return Value::object(std::make_shared<Function>(
        std::string(name), [self, fn](Renderer&, const Args& args) { return fn(self, args); }));
  }
  if (bit && std::find(std::begin(kModifying), std::end(kModifying), name) != std::end(kModifying))
    return Value::undefined(
        fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, self.type_name()));
  return std::nullopt;
}

}  // namespace fitgrad::data::jinja
