// Jinja values (jinja_value.h).
//
// Note [Jinja values]
// fitgrad has its own value type rather than rendering over nlohmann::json, because
// templates need what JSON lacks: Python's int/float split (7 // 2, 1 / 2), tuples (they
// print as "(1, 2)"), Undefined (printed as nothing, false, iterable as empty, an error in
// arithmetic and attribute access), namespace() objects that loops assign into, macros, and
// the loop variable. Dicts keep insertion order, as Python's do: tools and tool-call
// arguments are printed with tojson, so key order is visible in the prompt. Input JSON should
// therefore be nlohmann::ordered_json (a plain nlohmann::json converts, with its keys sorted).
// Strings, lists, dicts and objects are shared pointers: a copy is cheap, and a namespace
// assigned through one reference is seen through all, as in Python. Lists and dicts are
// never modified once built (transformers renders in jinja2's ImmutableSandboxedEnvironment,
// where append/update/pop are refused).
//
// Note [Markup strings]
// transformers' environment does not autoescape, yet jinja2's Markup class still acts where a
// template makes one: `"text"|safe` and `x|e` are Markup, and Markup + str escapes the str
// (str + Markup too). Templates do write `"Use the function '"|safe + name + ...` (Functionary),
// whose output therefore has &#34; for every quote in the names and JSON that follow. fitgrad
// keeps that one rule: a string value carries a Markup flag, |safe and |escape set it, `+`
// escapes the plain side and keeps it, `*` keeps it, and |escape leaves a Markup string as
// it is. Everything else (~, join, methods, other filters) yields plain strings; jinja2
// keeps Markup through a few str methods and filters, which no chat template relies on.
#include "data/jinja_value.h"

#include <algorithm>

#include "data/jinja_text.h"
#include "tensor/error.h"

namespace fitgrad::data::jinja {

const Value* Args::find(size_t index, std::string_view name) const {
  const Value* hit = index < positional.size() ? &positional[index] : nullptr;
  for (const auto& [key, value] : named) {
    if (key != name) continue;
    FG_CHECK(!hit, "got multiple values for argument '{}'", name);
    hit = &value;
  }
  return hit;
}

void Args::expect(std::string_view what, size_t max_positional,
                  std::initializer_list<std::string_view> names) const {
  FG_CHECK(positional.size() <= max_positional,
           "{} takes at most {} positional argument(s), {} given", what, max_positional,
           positional.size());
  for (const auto& kv : named)
    FG_CHECK(std::find(names.begin(), names.end(), kv.first) != names.end(),
             "{} got an unexpected keyword argument '{}'", what, kv.first);
}

std::string Object::repr() const { return fmt::format("<{} object>", type_name()); }

Value Object::attr(std::string_view name) const {
  return Value::undefined(fmt::format("'{}' object has no attribute '{}'", type_name(), name));
}

Value Object::call(Renderer&, const Args&) const {
  throw Error(fmt::format("'{}' object is not callable", type_name()));
}

Value Function::call(Renderer& renderer, const Args& args) const { return impl_(renderer, args); }

Value Value::undefined(std::string hint) {
  Value v;
  v.p_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::none;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::boolean;
  v.b_ = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::integer;
  v.i_ = i;
  return v;
}

Value Value::real(double d) {
  Value v;
  v.kind_ = Kind::real;
  v.f_ = d;
  return v;
}

void check_text(size_t bytes, std::string_view what) {
  FG_CHECK(bytes <= kMaxTextBytes,
           "{} would make a string of {} bytes, more than the {} MiB a template may build", what,
           bytes, kMaxTextBytes >> 20);
}

void check_items(size_t items, std::string_view what) {
  FG_CHECK(items <= kMaxItems,
           "{} would make a list of {} items, more than the {} a template "
           "may build",
           what, items, kMaxItems);
}

Value Value::string(std::string s) {
  check_text(s.size(), "an operation");
  Value v;
  v.kind_ = Kind::string;
  v.p_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::markup(std::string s) {
  Value v = string(std::move(s));
  v.b_ = true;
  return v;
}

namespace {

// The nesting of a list's or dict's children, +1; throws past kMaxValueDepth.
int depth_over(int child_depth) {
  FG_CHECK(child_depth < kMaxValueDepth,
           "a value nests deeper than {} lists and dicts, more than a template may build",
           kMaxValueDepth);
  return child_depth + 1;
}

int depth_of(const Value& v) {
  return v.is_list() ? v.list().depth : v.is_dict() ? v.dict().depth : 0;
}

}  // namespace

Value Value::sequence(uint8_t type, std::vector<Value> items) {
  check_items(items.size(), "an operation");
  int deepest = 0;
  for (const Value& item : items) deepest = std::max(deepest, depth_of(item));
  auto l = std::make_shared<List>();
  l->depth = depth_over(deepest);
  l->type = List::Type(type);
  l->items = std::move(items);
  Value v;
  v.kind_ = Kind::list;
  v.p_ = std::move(l);
  return v;
}

Value Value::list(std::vector<Value> items) {
  return sequence(uint8_t(List::Type::list), std::move(items));
}
Value Value::tuple(std::vector<Value> items) {
  return sequence(uint8_t(List::Type::tuple), std::move(items));
}
Value Value::generator(std::vector<Value> items) {
  return sequence(uint8_t(List::Type::generator), std::move(items));
}

Value Value::dict(std::shared_ptr<Dict> d) {
  int deepest = 0;
  for (const auto& [key, value] : d->items)
    deepest = std::max({deepest, depth_of(key), depth_of(value)});
  d->depth = depth_over(deepest);
  Value v;
  v.kind_ = Kind::dict;
  v.p_ = std::move(d);
  return v;
}

Value Value::object(std::shared_ptr<Object> o) {
  Value v;
  v.kind_ = Kind::object;
  v.p_ = std::move(o);
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return none();
    case nlohmann::ordered_json::value_t::boolean: return boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      FG_CHECK(u <= uint64_t(INT64_MAX), "the integer {} does not fit in 64 bits", u);
      return integer(int64_t(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return real(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(from_json(x));
      return list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto d = std::make_shared<Dict>();
      d->items.reserve(j.size());
      for (const auto& [key, x] : j.items()) d->items.emplace_back(string(key), from_json(x));
      return dict(std::move(d));
    }
    default: throw Error("binary JSON values have no Jinja equivalent");
  }
}

const std::string& Value::str() const { return *static_cast<const std::string*>(p_.get()); }
const List& Value::list() const { return *static_cast<const List*>(p_.get()); }
const Dict& Value::dict() const { return *static_cast<const Dict*>(p_.get()); }
const Object& Value::object() const { return *static_cast<const Object*>(p_.get()); }
std::shared_ptr<Object> Value::object_ptr() const {
  return std::const_pointer_cast<Object>(std::static_pointer_cast<const Object>(p_));
}

const std::string& Value::undefined_hint() const {
  static const std::string kNone = "undefined value";
  return p_ ? *static_cast<const std::string*>(p_.get()) : kNone;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::undefined:
    case Kind::none: return false;
    case Kind::boolean: return b_;
    case Kind::integer: return i_ != 0;
    case Kind::real: return f_ != 0;
    case Kind::string: return !str().empty();
    case Kind::list: return list().type == List::Type::generator || !list().items.empty();
    case Kind::dict: return !dict().items.empty();
    case Kind::object: return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::undefined: return "Undefined";
    case Kind::none: return "NoneType";
    case Kind::boolean: return "bool";
    case Kind::integer: return "int";
    case Kind::real: return "float";
    case Kind::string: return "str";
    case Kind::list:
      return list().type == List::Type::list    ? "list"
             : list().type == List::Type::tuple ? "tuple"
                                                : "generator";
    case Kind::dict: return "dict";
    case Kind::object: return object().type_name();
  }
  return "?";
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.str()));
  for (const auto& [k, v] : items)
    if (equal(k, key)) return &v;
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k.is_string() && k.str() == key) return &v;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto& [k, v] : items) {
    if (equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

bool equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return a.as_int() == b.as_int();
    return a.as_real() == b.as_real();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::undefined:
    case K::none: return true;
    case K::string: return a.str() == b.str();
    case K::list: {
      const List &x = a.list(), &y = b.list();
      if (x.type != y.type || x.type == List::Type::generator) return &x == &y;
      if (x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i)
        if (!equal(x.items[i], y.items[i])) return false;
      return true;
    }
    case K::dict: {
      const Dict &x = a.dict(), &y = b.dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* other = y.find(k);
        if (!other || !equal(v, *other)) return false;
      }
      return true;
    }
    case K::object: return &a.object() == &b.object();
    default: return false;
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return a.as_int() < b.as_int();
    return a.as_real() < b.as_real();
  }
  if (a.is_undefined() || b.is_undefined())
    throw Error(a.is_undefined() ? a.undefined_hint() : b.undefined_hint());
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 order = code point order
  if (a.is_list() && b.is_list() && a.list().type == b.list().type &&
      a.list().type != List::Type::generator) {
    const auto &x = a.list().items, &y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equal(x[i], y[i])) return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  throw Error(fmt::format("'<' not supported between instances of '{}' and '{}'", a.type_name(),
                          b.type_name()));
}

void append_str(const Value& v, std::string& out) {
  switch (v.kind()) {
    case Value::Kind::undefined: return;
    case Value::Kind::string: out += v.str(); return;
    default: append_repr(v, out);
  }
}

std::string to_str(const Value& v) {
  std::string out;
  append_str(v, out);
  return out;
}

namespace {

// The depth of append_repr's recursion on this thread, which namespaces inside namespaces
// (no depth of their own) could take past any stack (Note [Jinja render bounds]).
class ReprDepth {
 public:
  ReprDepth() {
    if (++depth_ <= kMaxValueDepth) return;
    --depth_;
    throw Error(
        fmt::format("a value nests deeper than {} levels, too deep to print", kMaxValueDepth));
  }
  ~ReprDepth() { --depth_; }
  ReprDepth(const ReprDepth&) = delete;
  ReprDepth& operator=(const ReprDepth&) = delete;

 private:
  static thread_local int depth_;
};
thread_local int ReprDepth::depth_ = 0;

}  // namespace

void append_repr(const Value& v, std::string& out) {
  const ReprDepth depth;
  switch (v.kind()) {
    case Value::Kind::undefined: out += "Undefined"; return;
    case Value::Kind::none: out += "None"; return;
    case Value::Kind::boolean: out += v.as_bool() ? "True" : "False"; return;
    case Value::Kind::integer: out += std::to_string(v.as_int()); return;
    case Value::Kind::real: out += float_repr(v.as_real()); return;
    case Value::Kind::string:
      if (v.is_markup()) out += "Markup(";
      append_string_repr(v.str(), out);
      if (v.is_markup()) out += ')';
      return;
    case Value::Kind::list: {
      const List& l = v.list();
      if (l.type == List::Type::generator) {
        out += "<generator object>";
        return;
      }
      const bool tuple = l.type == List::Type::tuple;
      out += tuple ? '(' : '[';
      for (size_t i = 0; i < l.items.size(); ++i) {
        if (i) out += ", ";
        append_repr(l.items[i], out);
      }
      if (tuple && l.items.size() == 1) out += ',';
      out += tuple ? ')' : ']';
      return;
    }
    case Value::Kind::dict: {
      out += '{';
      bool first = true;
      for (const auto& [k, x] : v.dict().items) {
        if (!first) out += ", ";
        first = false;
        append_repr(k, out);
        out += ": ";
        append_repr(x, out);
      }
      out += '}';
      return;
    }
    case Value::Kind::object: out += v.object().repr(); return;
  }
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined: return {};
    case Value::Kind::list: return v.list().items;
    case Value::Kind::dict: {
      std::vector<Value> keys;
      keys.reserve(v.dict().items.size());
      for (const auto& kv : v.dict().items) keys.push_back(kv.first);
      return keys;
    }
    case Value::Kind::string: {
      std::vector<Value> chars;
      const std::string& s = v.str();
      const std::vector<size_t> at = code_point_offsets(s);
      chars.reserve(at.size() - 1);
      for (size_t i = 0; i + 1 < at.size(); ++i)
        chars.push_back(Value::string(s.substr(at[i], at[i + 1] - at[i])));
      return chars;
    }
    default: throw Error(fmt::format("'{}' object is not iterable", v.type_name()));
  }
}

}  // namespace fitgrad::data::jinja
