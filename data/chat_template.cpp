// ChatTemplate (chat_template.h).
//
// Note [Chat template engine]
// The engine is split by stage: jinja_lexer (text, tags, whitespace control),
// jinja_expr_parser and jinja_parser (jinja2's grammar to jinja_ast's tree, every name
// checked), jinja_render (scopes, loops, macros, {% generation %}), and the library:
// jinja_value (Python values), jinja_ops (operators and lookups), jinja_filters and
// jinja_json (tojson), jinja_builtins (tests, globals), jinja_methods (str/dict/list
// methods), jinja_text (Python string rules).
// Supported: {{ }}, {% %}, {# #}, whitespace control ("-", "+", trim_blocks, lstrip_blocks),
// raw, if/elif/else, for (else, `if` filter, unpacking, loop.*), break/continue, set (names,
// tuples, namespace attributes, blocks), macro (defaults, varargs, kwargs), filter blocks,
// with, print, generation; all of jinja2's operators, literals, subscripts and slices; the
// filters of Note [Jinja filters], the tests in jinja_builtins.cpp, the methods of Note
// [Jinja methods]; globals range, dict, namespace, raise_exception, strftime_now.
// Not supported (errors at parse time): extends, block, include, import, call blocks,
// recursive loops, *args/**kwargs in calls, and jinja2 filters no chat template uses
// (batch, slice, groupby, format, truncate, wordwrap, urlize, xmlattr, ...).
// Known differences, none of which the chat templates in tests/golden/chat_templates hit:
// errors other than raise_exception carry fitgrad's wording, not Python's; an unknown filter
// or test inside a branch that never runs is still an error (jinja2 fails only when it runs);
// Markup survives only `+` and `*` (Note [Markup strings]); integers are 64-bit; range() and
// dict.items() print as lists; case mapping and repr() beyond the ranges of Note [Python
// text rules] differ.
#include "data/chat_template.h"

#include <chrono>

#include "data/jinja_parser.h"
#include "data/jinja_render.h"

namespace fitgrad::data {

ChatTemplate ChatTemplate::parse(std::string_view source, std::string name) {
  ChatTemplate t;
  t.name_ = std::move(name);
  try {
    t.template_ = std::make_shared<const jinja::Template>(jinja::parse_template(source));
  } catch (const Error& e) {
    throw Error(fmt::format("[chat template {}] {}", t.name_, e.what()));
  }
  return t;
}

ChatTemplate::Rendered ChatTemplate::render(const nlohmann::ordered_json& context) const {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm local{};
  localtime_r(&now, &local);
  return render(context, local);
}

ChatTemplate::Rendered ChatTemplate::render(const nlohmann::ordered_json& context,
                                            const std::tm& now) const {
  FG_CHECK(context.is_object(), "[chat template {}] the context must be a JSON object, not {}",
           name_, context.type_name());
  auto root = std::make_shared<jinja::Scope>();
  root->vars.reserve(context.size());
  for (const auto& [key, value] : context.items())
    root->vars.emplace_back(key, jinja::Value::from_json(value));
  Rendered out;
  jinja::Renderer renderer(now);
  try {
    renderer.render(*template_, std::move(root), out.text, out.generation_spans);
  } catch (const jinja::Raised& e) {
    throw ChatTemplateRaised(
        fmt::format("[chat template {}] line {}: {}", name_, renderer.line(), e.what()), e.what());
  } catch (const Error& e) {
    throw Error(fmt::format("[chat template {}] line {}: {}", name_, renderer.line(), e.what()));
  }
  return out;
}

nlohmann::ordered_json chat_context(const nlohmann::ordered_json& messages,
                                    bool add_generation_prompt,
                                    const nlohmann::ordered_json& extra) {
  FG_CHECK(extra.is_object(), "[chat template] the extra variables must be a JSON object");
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  context["messages"] = messages;
  context["tools"] = extra.contains("tools") ? extra["tools"] : nlohmann::ordered_json();
  context["documents"] =
      extra.contains("documents") ? extra["documents"] : nlohmann::ordered_json();
  context["add_generation_prompt"] = add_generation_prompt;
  for (const auto& [key, value] : extra.items())
    if (key != "tools" && key != "documents") context[key] = value;
  return context;
}

}  // namespace fitgrad::data
