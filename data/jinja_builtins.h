// The filters, tests, globals and Python methods the Jinja engine provides
// (data/chat_template.h): jinja2's built-ins that chat templates use, transformers' tojson,
// raise_exception and strftime_now, and the str/dict/list methods of Python that templates
// call. The parser looks filters and tests up by name once, so an unknown one is an error
// before anything renders.
#pragma once

#include <optional>
#include <string_view>

#include "data/jinja_value.h"

namespace fitgrad::data::jinja {

using FilterFn = Value (*)(Renderer& r, const Value& input, const Args& args);
using TestFn = bool (*)(Renderer& r, const Value& value, const Args& args);

// namespace(...): an object whose attributes `{% set ns.x = ... %}` assigns, even from
// inside a loop (the way templates carry state out of loops).
class Namespace : public Object {
 public:
  std::string type_name() const override { return "Namespace"; }
  std::string repr() const override;
  Value attr(std::string_view name) const override;
  void set(std::string_view name, Value value);
  // Drops every attribute (Renderer's end: Note [Jinja render bounds]).
  void clear() { attrs_.items.clear(); }

 private:
  Dict attrs_;
};

// transformers' tojson filter (jinja_json.cpp), which find_filter returns for "tojson".
Value tojson(Renderer& r, const Value& input, const Args& args);

// nullptr when there is no such filter or test.
FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);

// Whether `name` is a global function (range, dict, namespace, raise_exception,
// strftime_now), and that function as a callable value.
bool is_global(std::string_view name);
Value global(std::string_view name);

// Whether some str, dict or list method is called `name`.
bool is_method_name(std::string_view name);
// self.name as a bound method; an undefined value naming the sandbox's refusal for a method
// that modifies; nullopt when self's type has no method of that name (attribute lookup then
// goes on to dict keys, as jinja2's getattr does).
std::optional<Value> method(const Value& self, std::string_view name);

}  // namespace fitgrad::data::jinja
