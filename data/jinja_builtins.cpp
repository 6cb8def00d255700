// jinja2's tests and globals, transformers' globals, and the Python methods templates call
// (jinja_builtins.h); the filters are in jinja_filters.cpp.
//
// Note [Jinja methods]
// Templates call Python methods on their values: message.content.strip(), .split('</think>'),
// .startswith(...), tool.items(), message.get('x'). The str methods here take Python's
// arguments, with positions and lengths in code points; dict.items/keys/values return lists
// (Python's views print differently, "dict_items([...])", which no template prints).
// ImmutableSandboxedEnvironment refuses the methods that modify a list or dict (append,
// update, pop, ...): calling one is an error here too, with the sandbox's message.
#include "data/jinja_builtins.h"

#include <algorithm>
#include <ctime>

#include "data/jinja_ops.h"
#include "data/jinja_render.h"
#include "data/jinja_text.h"
#include "data/utf8.h"
#include "tensor/error.h"

namespace fitgrad::data::jinja {
namespace {

const Value& required(const Args& a, size_t i, std::string_view name, std::string_view what) {
  const Value* v = a.find(i, name);
  FG_CHECK(v, "{} missing required argument '{}'", what, name);
  return *v;
}

std::string str_arg(const Value& v, std::string_view what) {
  FG_CHECK(v.is_string(), "{} needs a str argument, not {}", what, v.type_name());
  return v.str();
}

// ---- tests ----

bool defined(Renderer&, const Value& v, const Args&) { return !v.is_undefined(); }
bool undefined(Renderer&, const Value& v, const Args&) { return v.is_undefined(); }
bool none(Renderer&, const Value& v, const Args&) { return v.is_none(); }
bool boolean(Renderer&, const Value& v, const Args&) { return v.kind() == Value::Kind::boolean; }
bool true_(Renderer&, const Value& v, const Args&) {
  return v.kind() == Value::Kind::boolean && v.as_bool();
}
bool false_(Renderer&, const Value& v, const Args&) {
  return v.kind() == Value::Kind::boolean && !v.as_bool();
}
bool integer(Renderer&, const Value& v, const Args&) { return v.kind() == Value::Kind::integer; }
bool float_(Renderer&, const Value& v, const Args&) { return v.kind() == Value::Kind::real; }
bool number(Renderer&, const Value& v, const Args&) { return v.is_number(); }
bool string(Renderer&, const Value& v, const Args&) { return v.is_string(); }
bool mapping(Renderer&, const Value& v, const Args&) { return v.is_dict(); }
bool iterable(Renderer&, const Value& v, const Args&) {
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
}
bool sequence(Renderer&, const Value& v, const Args&) {
  return v.is_undefined() || v.is_string() || v.is_dict() ||
         (v.is_list() && v.list().type != List::Type::generator);
}
bool callable(Renderer&, const Value& v, const Args&) {
  return v.is_object() && v.object().callable();
}
bool escaped(Renderer&, const Value&, const Args&) { return false; }
bool lower(Renderer&, const Value& v, const Args&) { return py_islower(to_str(v)); }
bool upper(Renderer&, const Value& v, const Args&) { return py_isupper(to_str(v)); }

bool divisible(const Value& v, const Value& by) {
  return equal(arithmetic(BinOp::mod, v, by), Value::integer(0));
}
bool even(Renderer&, const Value& v, const Args&) { return divisible(v, Value::integer(2)); }
bool odd(Renderer&, const Value& v, const Args&) {
  return equal(arithmetic(BinOp::mod, v, Value::integer(2)), Value::integer(1));
}
bool divisibleby(Renderer&, const Value& v, const Args& a) {
  return divisible(v, required(a, 0, "num", "divisibleby"));
}

template <BinOp op>
bool compare_test(Renderer&, const Value& v, const Args& a) {
  return compare(op, v, required(a, 0, "other", "comparison test"));
}
bool in(Renderer&, const Value& v, const Args& a) {
  return contains(required(a, 0, "seq", "in"), v);
}
bool sameas(Renderer&, const Value& v, const Args& a) {
  const Value& other = required(a, 0, "other", "sameas");
  if (v.kind() != other.kind()) return false;
  if (v.is_none() || v.is_undefined() || v.is_number()) return equal(v, other);
  if (v.is_object()) return &v.object() == &other.object();
  return false;
}
bool filter(Renderer&, const Value& v, const Args&) {
  return v.is_string() && find_filter(v.str()) != nullptr;
}
bool test(Renderer&, const Value& v, const Args&) {
  return v.is_string() && find_test(v.str()) != nullptr;
}

struct NamedTest {
  std::string_view name;
  TestFn fn;
};

constexpr NamedTest kTests[] = {
    {"boolean", boolean},
    {"callable", callable},
    {"defined", defined},
    {"divisibleby", divisibleby},
    {"eq", compare_test<BinOp::eq>},
    {"equalto", compare_test<BinOp::eq>},
    {"==", compare_test<BinOp::eq>},
    {"escaped", escaped},
    {"even", even},
    {"false", false_},
    {"filter", filter},
    {"float", float_},
    {"ge", compare_test<BinOp::ge>},
    {">=", compare_test<BinOp::ge>},
    {"gt", compare_test<BinOp::gt>},
    {">", compare_test<BinOp::gt>},
    {"greaterthan", compare_test<BinOp::gt>},
    {"in", in},
    {"integer", integer},
    {"iterable", iterable},
    {"le", compare_test<BinOp::le>},
    {"<=", compare_test<BinOp::le>},
    {"lower", lower},
    {"lt", compare_test<BinOp::lt>},
    {"<", compare_test<BinOp::lt>},
    {"lessthan", compare_test<BinOp::lt>},
    {"mapping", mapping},
    {"ne", compare_test<BinOp::ne>},
    {"!=", compare_test<BinOp::ne>},
    {"none", none},
    {"number", number},
    {"odd", odd},
    {"sameas", sameas},
    {"sequence", sequence},
    {"string", string},
    {"test", test},
    {"true", true_},
    {"undefined", undefined},
    {"upper", upper},
};

// ---- globals ----

Value range(Renderer&, const Args& a) {
  a.expect("range", 3, {});
  FG_CHECK(!a.positional.empty(), "range expected at least 1 argument, got 0");
  for (const Value& v : a.positional)
    FG_CHECK(v.is_int(), "'{}' object cannot be interpreted as an integer", v.type_name());
  const size_t n = a.positional.size();
  const int64_t start = n == 1 ? 0 : a.positional[0].as_int();
  const int64_t stop = n == 1 ? a.positional[0].as_int() : a.positional[1].as_int();
  const int64_t step = n == 3 ? a.positional[2].as_int() : 1;
  FG_CHECK(step != 0, "range() arg 3 must not be zero");
  std::vector<Value> out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    FG_CHECK(out.size() < 100000,
             "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    out.push_back(Value::integer(i));
  }
  return Value::list(std::move(out));
}

void fill_dict(Dict& d, const Args& a, std::string_view what) {
  FG_CHECK(a.positional.size() <= 1, "{} expected at most 1 positional argument", what);
  if (!a.positional.empty()) {
    const Value& src = a.positional[0];
    if (src.is_dict()) {
      for (const auto& [k, v] : src.dict().items) d.set(k, v);
    } else {
      for (const Value& pair : iterate(src)) {
        const std::vector<Value> kv = iterate(pair);
        FG_CHECK(kv.size() == 2, "{}: a sequence element has length {}; 2 is required", what,
                 kv.size());
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : a.named) d.set(Value::string(k), v);
}

Value dict(Renderer&, const Args& a) {
  auto d = std::make_shared<Dict>();
  fill_dict(*d, a, "dict");
  return Value::dict(std::move(d));
}

Value namespace_(Renderer& r, const Args& a) {
  Dict d;
  fill_dict(d, a, "namespace");
  auto ns = std::make_shared<Namespace>();
  for (auto& [k, v] : d.items) ns->set(to_str(k), v);
  r.keep(ns);
  return Value::object(std::move(ns));
}

Value raise_exception(Renderer&, const Args& a) {
  a.expect("raise_exception", 1, {"message"});
  throw Raised(to_str(required(a, 0, "message", "raise_exception")));
}

// datetime.now().strftime(format) of a naive datetime: %f is microseconds (0 here), %z and
// %Z are empty, the rest is the C library's strftime in the C locale, as in CPython.
Value strftime_now(Renderer& r, const Args& a) {
  a.expect("strftime_now", 1, {"format"});
  const std::string format = str_arg(required(a, 0, "format", "strftime_now"), "strftime_now");
  std::string fixed;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] == '%' && i + 1 < format.size()) {
      const char c = format[i + 1];
      if (c == 'f' || c == 'z' || c == 'Z') {
        if (c == 'f') fixed += "000000";
        ++i;
        continue;
      }
      fixed += format.substr(i, 2);
      ++i;
      continue;
    }
    fixed += format[i];
  }
  if (fixed.empty()) return Value::string("");
  std::string out(256 + fixed.size() * 8, '\0');
  const size_t n = std::strftime(out.data(), out.size(), fixed.c_str(), &r.now());
  out.resize(n);
  return Value::string(std::move(out));
}

struct NamedGlobal {
  std::string_view name;
  Value (*fn)(Renderer&, const Args&);
};

constexpr NamedGlobal kGlobals[] = {
    {"range", range},
    {"dict", dict},
    {"namespace", namespace_},
    {"raise_exception", raise_exception},
    {"strftime_now", strftime_now},
};

}  // namespace

std::string Namespace::repr() const {
  // A namespace inside itself prints as Python's dict repr does on recursion: {...}.
  static thread_local std::vector<const Namespace*> printing;
  if (std::find(printing.begin(), printing.end(), this) != printing.end())
    return "<Namespace {...}>";
  printing.push_back(this);
  struct Pop {
    ~Pop() { printing.pop_back(); }
  } pop;
  std::string out = "<Namespace {";
  bool first = true;
  for (const auto& [k, v] : attrs_.items) {
    if (!first) out += ", ";
    first = false;
    append_repr(k, out);
    out += ": ";
    append_repr(v, out);
  }
  return out + "}>";
}

Value Namespace::attr(std::string_view name) const {
  const Value* v = attrs_.find(name);
  return v ? *v : Object::attr(name);
}

void Namespace::set(std::string_view name, Value value) {
  attrs_.set(Value::string(std::string(name)), std::move(value));
}

TestFn find_test(std::string_view name) {
  for (const NamedTest& t : kTests)
    if (t.name == name) return t.fn;
  return nullptr;
}

bool is_global(std::string_view name) {
  return std::any_of(std::begin(kGlobals), std::end(kGlobals),
                     [&](const NamedGlobal& g) { return g.name == name; });
}

Value global(std::string_view name) {
  for (const NamedGlobal& g : kGlobals)
    if (g.name == name) return Value::object(std::make_shared<Function>(std::string(name), g.fn));
  return Value::undefined(fmt::format("'{}' is undefined", name));
}

}  // namespace fitgrad::data::jinja
