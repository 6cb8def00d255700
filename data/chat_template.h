// Chat templates: the Jinja programs that Hugging Face models ship (tokenizer_config.json's
// "chat_template", GGUF's tokenizer.chat_template) to turn a conversation into the model's
// prompt text. ChatTemplate renders them exactly as transformers' apply_chat_template does
// with Python's jinja2 (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, break and
// continue, {% generation %}, transformers' tojson, raise_exception and strftime_now), on
// fitgrad's own Jinja engine (data/jinja_*.h; what it covers: Note [Chat template engine] in
// chat_template.cpp). A template is parsed once, with every unsupported construct reported
// then, and rendered any number of times.
#pragma once

#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensor/error.h"

namespace fitgrad::data {

namespace jinja {
struct Template;
}

// raise_exception(message) called by a template (e.g. "Conversation roles must alternate
// user/assistant/user/assistant/..."): what() names the template and line, message() is the
// template's message alone, as transformers' TemplateError carries it.
class ChatTemplateRaised : public Error {
 public:
  ChatTemplateRaised(const std::string& what, std::string message)
      : Error(what), message_(std::move(message)) {}
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

class ChatTemplate {
 public:
  struct Rendered {
    std::string text;
    // The byte range [first, second) of `text` that each {% generation %} block produced, in
    // order: the assistant's part that transformers' return_assistant_tokens_mask marks
    // (Note [Generation spans] in jinja_render.cpp).
    std::vector<std::pair<size_t, size_t>> generation_spans;
  };

  // `name` labels errors: "[chat template NAME] line N: ...". Throws fitgrad::Error for a
  // syntax error or an unsupported tag, filter, test, function or method.
  static ChatTemplate parse(std::string_view source, std::string name);

  // Renders with the variables of `context` (a JSON object; chat_context builds the one
  // transformers passes). strftime_now() formats the local time, or `now` when given.
  // Throws ChatTemplateRaised for raise_exception, fitgrad::Error for any other failure
  // (an undefined value used in arithmetic, a type error, ...), naming the line.
  Rendered render(const nlohmann::ordered_json& context) const;
  Rendered render(const nlohmann::ordered_json& context, const std::tm& now) const;

  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::shared_ptr<const jinja::Template> template_;
};

// The variables transformers' apply_chat_template passes: messages, tools and documents
// (null when `extra` has none, as transformers passes None), add_generation_prompt, then
// every other key of `extra` (bos_token, eos_token, date_string, enable_thinking, ...).
nlohmann::ordered_json chat_context(
    const nlohmann::ordered_json& messages, bool add_generation_prompt,
    const nlohmann::ordered_json& extra = nlohmann::ordered_json::object());

}  // namespace fitgrad::data
