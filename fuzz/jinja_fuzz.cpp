// libFuzzer target for the Jinja engine of chat templates (data/chat_template.h): the input
// is a template's source. It is parsed, and a template that parses is rendered (with the
// generation prompt for sources of odd length) over a fixed conversation with a system prompt, a tool
// call, a tool answer and tool schemas, as transformers passes them. fitgrad::Error (with
// ChatTemplateRaised for raise_exception) is the expected outcome for a template fitgrad
// refuses or that fails as it renders; anything else (a crash, a stack overflow past the
// bounds of Note [Jinja nesting bound] and Note [Jinja render bounds], a sanitizer report,
// another exception) is a bug. The seeds are the real templates of
// tests/golden/chat_templates, and jinja.dict holds their tags, names and operators.
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "data/chat_template.h"
#include "fuzz/small_stack.h"
#include "tensor/error.h"

namespace {

using json = nlohmann::ordered_json;

const json& conversation() {
  static const json c = json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": "Weather in Paris? \u00e9t\u00e9"},
      {"role": "assistant", "content": "",
       "tool_calls": [{"type": "function", "function": {"name": "weather",
                                                        "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "name": "weather", "content": "21 C"},
      {"role": "assistant", "content": "It is 21 C."},
      {"role": "user", "content": [{"type": "text", "text": "Thanks"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "weather", "description": "d",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                              "required": ["city"]}}}],
    "bos_token": "<s>", "eos_token": "</s>"})");
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  fitgrad::fuzz::on_small_stack([&] {
    std::optional<fitgrad::data::ChatTemplate> t;
    try {
      t = fitgrad::data::ChatTemplate::parse(source, "fuzz");
    } catch (const fitgrad::Error&) {
      return;
    }
    std::tm now{};
    now.tm_year = 124;
    now.tm_mday = 7;
    json extra = conversation();
    const json messages = extra["messages"];
    extra.erase("messages");
    // One rendering an input (with the generation prompt when the source's length is odd), so
    // that a template that runs to the work bound stays well within -timeout.
    try {
      t->render(fitgrad::data::chat_context(messages, source.size() % 2 == 1, extra), now);
    } catch (const fitgrad::Error&) {
    }
  });
  return 0;
}
