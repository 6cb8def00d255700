// The values a Jinja chat template computes with (data/chat_template.h): Python's None, bool,
// int, float, str, list, tuple and dict, jinja2's Undefined, and objects (namespace(), the
// loop variable, macros and other callables). Values are cheap to copy: strings, lists, dicts
// and objects are shared, as Python shares them (Note [Jinja values] in jinja_value.cpp).
// Printing follows Python's str() and repr(), comparison and truthiness Python's rules.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fitgrad::data::jinja {

class Value;
class Renderer;

// The largest string and the longest list a template may build (Note [Jinja render bounds]
// in jinja_render.cpp): check_text throws when `bytes` exceed kMaxTextBytes, check_items when
// `items` exceed kMaxItems, naming `what`; Value::string and the sequences check themselves,
// and what repeats or pads checks the size before it builds.
inline constexpr size_t kMaxTextBytes = size_t(64) << 20;
inline constexpr size_t kMaxItems = size_t(10'000'000);
// The deepest value (lists and dicts inside each other, or namespaces printed inside each
// other) a template may build or print: recursion over a deeper one would run the stack out.
inline constexpr int kMaxValueDepth = 1000;
void check_text(size_t bytes, std::string_view what);
void check_items(size_t items, std::string_view what);

// Call arguments: positional, then keyword (name = value), in the order written.
struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;

  // The argument at `index` or named `name` (nullptr when neither was given). Throws when
  // both were.
  const Value* find(size_t index, std::string_view name) const;
  // Throws naming `what` when there are more than `max_positional` positional arguments or a
  // keyword outside `names`.
  void expect(std::string_view what, size_t max_positional,
              std::initializer_list<std::string_view> names) const;
};

// A value with attributes and possibly a call operator (namespace, loop, macro, method).
class Object {
 public:
  virtual ~Object() = default;
  virtual std::string type_name() const = 0;
  virtual std::string repr() const;
  // The attribute `name`, or an Undefined value.
  virtual Value attr(std::string_view name) const;
  virtual bool callable() const { return false; }
  virtual Value call(Renderer& renderer, const Args& args) const;
};

// A built-in callable: a global function, a bound method, loop.cycle.
class Function : public Object {
 public:
  using Impl = std::function<Value(Renderer&, const Args&)>;
  Function(std::string name, Impl impl) : name_(std::move(name)), impl_(std::move(impl)) {}
  std::string type_name() const override { return "builtin_function_or_method"; }
  std::string repr() const override { return "<built-in function " + name_ + ">"; }
  bool callable() const override { return true; }
  Value call(Renderer& renderer, const Args& args) const override;

 private:
  std::string name_;
  Impl impl_;
};

struct List;
struct Dict;

class Value {
 public:
  enum class Kind : uint8_t { undefined, none, boolean, integer, real, string, list, dict, object };

  // Undefined; `hint` is the message an operation that needs a value reports.
  Value() = default;
  static Value undefined(std::string hint);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value real(double d);
  static Value string(std::string s);
  // A markupsafe.Markup string (from |safe or |escape): `+` with a plain string escapes the
  // plain one, as in jinja2 even without autoescaping (Note [Markup strings] in
  // jinja_value.cpp).
  static Value markup(std::string s);
  static Value list(std::vector<Value> items);
  static Value tuple(std::vector<Value> items);
  // A one-pass iterable (map, select, ...): iterates and converts like a list, but has no
  // length and is always true, as Python's generators.
  static Value generator(std::vector<Value> items);
  static Value dict(std::shared_ptr<Dict> d);
  static Value object(std::shared_ptr<Object> o);
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::undefined; }
  bool is_none() const { return kind_ == Kind::none; }
  bool is_string() const { return kind_ == Kind::string; }
  bool is_markup() const { return kind_ == Kind::string && b_; }
  bool is_list() const { return kind_ == Kind::list; }  // list, tuple or generator
  bool is_dict() const { return kind_ == Kind::dict; }
  bool is_object() const { return kind_ == Kind::object; }
  // int or bool (Python's bool is an int).
  bool is_int() const { return kind_ == Kind::integer || kind_ == Kind::boolean; }
  bool is_number() const { return is_int() || kind_ == Kind::real; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::boolean ? int64_t(b_) : i_; }
  double as_real() const { return kind_ == Kind::real ? f_ : double(as_int()); }
  const std::string& str() const;
  const List& list() const;
  const Dict& dict() const;
  const Object& object() const;
  std::shared_ptr<Object> object_ptr() const;
  const std::string& undefined_hint() const;

  bool truthy() const;
  // Python's type name, as its error messages spell it: "str", "int", "NoneType", ...
  std::string type_name() const;

 private:
  static Value sequence(uint8_t type, std::vector<Value> items);

  Kind kind_ = Kind::undefined;
  bool b_ = false;  // boolean: the value; string: whether it is Markup
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const void> p_;  // string, List, Dict, Object, or the undefined hint
};

struct List {
  enum class Type : uint8_t { list, tuple, generator };
  Type type = Type::list;
  std::vector<Value> items;
  int depth = 1;  // lists and dicts nested, this one included (kMaxValueDepth)
};

// Keys in insertion order, as Python's dict keeps them.
struct Dict {
  std::vector<std::pair<Value, Value>> items;
  int depth = 1;  // as List's, set when a Value wraps the dict

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);
};

// Python's ==, which never fails (a different type is simply unequal).
bool equal(const Value& a, const Value& b);
// Python's <; throws for types that have no order between them.
bool less(const Value& a, const Value& b);
// str(v) (undefined prints as nothing) and repr(v).
std::string to_str(const Value& v);
void append_str(const Value& v, std::string& out);
void append_repr(const Value& v, std::string& out);
// The items of an iterable: a list's items, a dict's keys, a string's characters, nothing
// for undefined; throws for anything else.
std::vector<Value> iterate(const Value& v);

}  // namespace fitgrad::data::jinja
