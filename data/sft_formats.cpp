// Detection and field-by-field checks of the instruction and chat record formats
// (data/sft_formats.h): each format's record becomes an SftExample, or an error naming the
// record, the field and the fix.
#include "data/sft_formats.h"

#include <fmt/format.h>

#include <array>
#include <utility>

#include "data/utf8.h"
#include "io/json_depth.h"
#include "tensor/error.h"

namespace fitgrad::data {
namespace {

// `text` for an error line: itself when it has at most `limit` bytes, else its first
// characters within `limit` bytes and "... (N bytes)", so that a 1 MB role does not become a
// 1 MB message.
std::string excerpt(std::string_view text, size_t limit = 64) {
  if (text.size() <= limit) return std::string(text);
  size_t end = 0;
  while (end < text.size()) {
    const size_t next = end + decode_utf8(text, end).length;
    if (next > limit) break;
    end = next;
  }
  return std::string(text.substr(0, end)) + fmt::format("... ({} bytes)", text.size());
}

using json = nlohmann::ordered_json;

// Note [Alpaca records]
// LLaMA-Factory's AlpacaDatasetConverter is the reference: the user message is the
// instruction and the input joined by "\n", each only when non-empty ("instruction\ninput",
// or just one of them), the assistant message is the output, a non-empty "system" becomes a
// system message in front, and "history", a list of [prompt, response] pairs, becomes the
// earlier user/assistant turns, in order, before the instruction. "input", "system" and
// "history" may be absent or null.
//
// Note [ShareGPT roles]
// "from" names, mapped exactly (lower case), as Unsloth's standardize_sharegpt (system;
// user, human, input; gpt, assistant, output) and LLaMA-Factory (human, gpt, observation,
// system) accept them, with Gemma's "model" and the tool answers' names:
//   system                                   -> system
//   human, user, input                       -> user
//   gpt, assistant, model, output            -> assistant
//   tool, observation, function_response     -> tool
// Any other name (LLaMA-Factory's "function_call", whose value is a JSON tool call, among
// them) is an error: its meaning depends on the template. A non-empty top-level "system"
// becomes a system message in front; "tools" is a list of tool schemas, or a string holding
// one as JSON (LLaMA-Factory stores it so).
constexpr std::array<std::pair<const char*, const char*>, 11> kShareGptRoles = {{
    {"system", "system"},
    {"human", "user"},
    {"user", "user"},
    {"input", "user"},
    {"gpt", "assistant"},
    {"assistant", "assistant"},
    {"model", "assistant"},
    {"output", "assistant"},
    {"tool", "tool"},
    {"observation", "tool"},
    {"function_response", "tool"},
}};

constexpr std::array<const char*, 4> kRoles = {"system", "user", "assistant", "tool"};

constexpr std::array<std::pair<SftFormat, const char*>, 8> kNames = {{
    {SftFormat::auto_detect, "auto"},
    {SftFormat::text, "text"},
    {SftFormat::alpaca, "alpaca"},
    {SftFormat::sharegpt, "sharegpt"},
    {SftFormat::messages, "messages"},
    {SftFormat::prompt_completion, "prompt_completion"},
    {SftFormat::preference, "preference"},
    {SftFormat::unpaired_preference, "unpaired_preference"},
}};

// Throws "[sft <where>] field '<field>': <what> (<why>)".
class Checker {
 public:
  Checker(const std::string& where, const std::string& why) : where_(where), why_(why) {}

  [[noreturn]] void fail(std::string_view field, const std::string& what) const {
    throw Error(fmt::format("[sft {}] field '{}': {} ({})", where_, field, what, why_));
  }

  // object[key]; `parent` is the object's path ("" for the record).
  const json& field(const json& object, std::string_view parent, const char* key) const {
    if (!object.contains(key))
      fail(parent.empty() ? std::string(key) : fmt::format("{}.{}", parent, key), "is missing");
    return object.at(key);
  }

  std::string string(const json& value, std::string_view path) const {
    if (!value.is_string()) fail(path, fmt::format("must be a string, not {}", value.type_name()));
    return value.get<std::string>();
  }

  // An optional string: absent or null is "".
  std::string optional_string(const json& object, std::string_view path, const char* key) const {
    if (!object.contains(key) || object.at(key).is_null()) return {};
    return string(object.at(key), path);
  }

  const json& nonempty_list(const json& value, std::string_view path) const {
    if (!value.is_array()) fail(path, fmt::format("must be a list, not {}", value.type_name()));
    if (value.empty()) fail(path, "is an empty conversation: give it at least one message");
    return value;
  }

  // Optional tool schemas: a list, or a string holding one as JSON; null when absent.
  json tools(const json& record) const {
    if (!record.contains("tools") || record.at("tools").is_null()) return json();
    json tools = record.at("tools");
    if (tools.is_string()) {
      const std::string text = tools.get<std::string>();
      try {
        io::check_json_depth(text, "is a string whose");
      } catch (const Error& e) {
        fail("tools", e.what());
      }
      tools = json::parse(text, nullptr, false);
      if (tools.is_discarded()) fail("tools", "is a string that is not valid JSON");
    }
    if (!tools.is_array())
      fail("tools", fmt::format("must be a list of tool schemas, not {}", tools.type_name()));
    for (size_t i = 0; i < tools.size(); ++i)
      if (!tools[i].is_object())
        fail(fmt::format("tools[{}]", i),
             fmt::format("must be an object (a tool schema), not {}", tools[i].type_name()));
    return tools;
  }

  // A messages list as apply_chat_template takes it; every key of a message is kept.
  void messages(const json& list, std::string_view path) const {
    nonempty_list(list, path);
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string at = fmt::format("{}[{}]", path, i);
      const json& m = list[i];
      if (!m.is_object()) fail(at, fmt::format("must be an object, not {}", m.type_name()));
      const std::string role = string(field(m, at, "role"), at + ".role");
      bool known = false;
      for (const char* r : kRoles) known = known || role == r;
      if (!known)
        fail(at + ".role",
             fmt::format("unknown role '{}'; use system, user, assistant or tool", excerpt(role)));
      const bool calls = m.contains("tool_calls") && !m.at("tool_calls").is_null();
      if (calls && !m.at("tool_calls").is_array())
        fail(at + ".tool_calls",
             fmt::format("must be a list, not {}", m.at("tool_calls").type_name()));
      const json content = m.contains("content") ? m.at("content") : json();
      if (content.is_null() && calls) continue;
      if (!content.is_string() && !content.is_array())
        fail(at + ".content",
             content.is_null() ? std::string("is missing (only a message with tool_calls may "
                                             "leave it out)")
                               : fmt::format("must be a string or a list of content parts, not {}",
                                             content.type_name()));
    }
  }

 private:
  const std::string& where_;
  const std::string& why_;
};

json message(const std::string& role, const std::string& content) {
  json m = json::object();
  m["role"] = role;
  m["content"] = content;
  return m;
}

SftExample alpaca(const json& record, const Checker& c, SftExample ex) {
  const std::string instruction = c.string(c.field(record, "", "instruction"), "instruction");
  const std::string input = c.optional_string(record, "input", "input");
  const std::string output = c.string(c.field(record, "", "output"), "output");
  const std::string system = c.optional_string(record, "system", "system");
  ex.messages = json::array();
  if (!system.empty()) ex.messages.push_back(message("system", system));
  if (record.contains("history") && !record.at("history").is_null()) {
    const json& history = record.at("history");
    if (!history.is_array())
      c.fail("history", fmt::format("must be a list of [prompt, response] pairs, not {}",
                                    history.type_name()));
    for (size_t i = 0; i < history.size(); ++i) {
      const std::string at = fmt::format("history[{}]", i);
      if (!history[i].is_array() || history[i].size() != 2)
        c.fail(at, "must be a [prompt, response] pair of strings");
      ex.messages.push_back(message("user", c.string(history[i][0], at + "[0]")));
      ex.messages.push_back(message("assistant", c.string(history[i][1], at + "[1]")));
    }
  }
  std::string user = instruction;
  if (!input.empty()) {
    if (!user.empty()) user += '\n';
    user += input;
  }
  ex.messages.push_back(message("user", user));
  ex.messages.push_back(message("assistant", output));
  return ex;
}

SftExample sharegpt(const json& record, const Checker& c, SftExample ex) {
  const json& turns = c.nonempty_list(c.field(record, "", "conversations"), "conversations");
  const std::string system = c.optional_string(record, "system", "system");
  ex.messages = json::array();
  if (!system.empty()) ex.messages.push_back(message("system", system));
  for (size_t i = 0; i < turns.size(); ++i) {
    const std::string at = fmt::format("conversations[{}]", i);
    if (!turns[i].is_object())
      c.fail(at, fmt::format("must be an object, not {}", turns[i].type_name()));
    const std::string from = c.string(c.field(turns[i], at, "from"), at + ".from");
    const char* role = nullptr;
    for (const auto& [name, mapped] : kShareGptRoles)
      if (from == name) role = mapped;
    if (role == nullptr)
      c.fail(at + ".from",
             fmt::format("unknown role '{}'; use system, human/user/input, "
                         "gpt/assistant/model/output or tool/observation/function_response",
                         excerpt(from)));
    ex.messages.push_back(message(role, c.string(c.field(turns[i], at, "value"), at + ".value")));
  }
  ex.tools = c.tools(record);
  return ex;
}

SftExample prompt_completion(const json& record, const Checker& c, SftExample ex) {
  const json& prompt = c.field(record, "", "prompt");
  const json& completion = c.field(record, "", "completion");
  if (prompt.is_string()) {
    if (!completion.is_string())
      c.fail("completion",
             fmt::format("must be a string, as the prompt is, not {}", completion.type_name()));
    ex.text = prompt.get<std::string>();
    ex.completion = completion.get<std::string>();
    return ex;
  }
  if (!prompt.is_array())
    c.fail("prompt",
           fmt::format("must be a string or a list of messages, not {}", prompt.type_name()));
  if (!completion.is_array())
    c.fail("completion", fmt::format("must be a list of messages, as the prompt is, not {}",
                                     completion.type_name()));
  c.messages(prompt, "prompt");
  c.messages(completion, "completion");
  ex.messages = prompt;
  ex.completion_messages = completion;
  ex.tools = c.tools(record);
  return ex;
}

// TRL's unpaired preference datasets (KTOTrainer): a prompt_completion record and a boolean
// "label", true where the completion is desirable.
SftExample unpaired_preference(const json& record, const Checker& c, SftExample ex) {
  const json& label = c.field(record, "", "label");
  if (!label.is_boolean())
    c.fail("label", fmt::format("must be true (a desirable completion) or false (an undesirable "
                                "one), not {} {}",
                                label.type_name(), label.dump()));
  ex = prompt_completion(record, c, std::move(ex));
  ex.label = label.get<bool>();
  return ex;
}

// Note [Preference records]
// TRL's explicit-prompt preference datasets: "prompt", "chosen" and "rejected", all three
// strings or all three message lists (the prompt's turns, each answer's turns after it). The
// implicit-prompt form (chosen and rejected whole conversations sharing their start) is not
// read: the record is refused with a message naming the missing prompt.
SftExample preference(const json& record, const Checker& c, SftExample ex) {
  const json& prompt = c.field(record, "", "prompt");
  const json& chosen = c.field(record, "", "chosen");
  const json& rejected = c.field(record, "", "rejected");
  if (prompt.is_string()) {
    for (const auto& [name, answer] : {std::pair{"chosen", &chosen}, {"rejected", &rejected}})
      if (!answer->is_string())
        c.fail(name,
               fmt::format("must be a string, as the prompt is, not {}", answer->type_name()));
    ex.text = prompt.get<std::string>();
    ex.completion = chosen.get<std::string>();
    ex.rejected = rejected.get<std::string>();
    return ex;
  }
  if (!prompt.is_array())
    c.fail("prompt",
           fmt::format("must be a string or a list of messages, not {}", prompt.type_name()));
  for (const auto& [name, answer] : {std::pair{"chosen", &chosen}, {"rejected", &rejected}}) {
    if (!answer->is_array())
      c.fail(name, fmt::format("must be a list of messages, as the prompt is, not {}",
                               answer->type_name()));
    c.messages(*answer, name);
  }
  c.messages(prompt, "prompt");
  ex.messages = prompt;
  ex.completion_messages = chosen;
  ex.rejected_messages = rejected;
  ex.tools = c.tools(record);
  return ex;
}

}  // namespace

std::pair<SftExample, SftExample> preference_answers(const SftExample& pair) {
  FG_ASSERT(pair.format == SftFormat::preference, "not a preference example");
  SftExample chosen = pair;
  chosen.format = SftFormat::prompt_completion;
  chosen.rejected.clear();
  chosen.rejected_messages = nullptr;
  SftExample rejected = chosen;
  rejected.completion = pair.rejected;
  rejected.completion_messages = pair.rejected_messages;
  return {std::move(chosen), std::move(rejected)};
}

std::pair<SftExample, SftExample> unpaired_answers(const SftExample& example,
                                                   const SftExample& other) {
  FG_ASSERT(example.format == SftFormat::unpaired_preference &&
                other.format == SftFormat::unpaired_preference,
            "not unpaired preference examples");
  if (example.conversational() != other.conversational())
    throw Error(fmt::format(
        "[sft {}] pairs its prompt with the completion of {} for KTO's KL estimate, and one is "
        "made of strings, the other of messages: give every record in one form",
        example.where, other.where));
  SftExample own = example;
  own.format = SftFormat::prompt_completion;
  SftExample mismatched = own;
  mismatched.completion = other.completion;
  mismatched.completion_messages = other.completion_messages;
  return {std::move(own), std::move(mismatched)};
}

std::string_view sft_format_name(SftFormat format) {
  for (const auto& [f, name] : kNames)
    if (f == format) return name;
  FG_ASSERT(false, "unknown SftFormat {}", int(format));
}

SftFormat parse_sft_format(std::string_view name) {
  for (const auto& [f, n] : kNames)
    if (name == n) return f;
  throw Error(
      fmt::format("[sft] unknown dataset format '{}'; use auto, text, alpaca, sharegpt, messages, "
                  "prompt_completion, preference or unpaired_preference",
                  name));
}

SftFormat detect_sft_format(const json& record, std::string_view text_field) {
  if (!record.is_object()) return SftFormat::auto_detect;
  if (record.contains("messages")) return SftFormat::messages;
  if (record.contains("conversations")) return SftFormat::sharegpt;
  if (record.contains("prompt") && record.contains("chosen") && record.contains("rejected"))
    return SftFormat::preference;
  if (record.contains("prompt") && record.contains("completion") && record.contains("label"))
    return SftFormat::unpaired_preference;
  if (record.contains("prompt") && record.contains("completion"))
    return SftFormat::prompt_completion;
  if (record.contains("instruction")) return SftFormat::alpaca;
  if (record.contains(std::string(text_field))) return SftFormat::text;
  return SftFormat::auto_detect;
}

SftExample sft_example_from_json(const json& record, SftFormat format, std::string_view text_field,
                                 const std::string& where, const std::string& why) {
  FG_ASSERT(format != SftFormat::auto_detect, "a record's format must be known");
  const Checker c(where, why);
  if (!record.is_object())
    throw Error(fmt::format("[sft {}] the record must be a JSON object, not {} ({})", where,
                            record.type_name(), why));
  SftExample ex;
  ex.where = where;
  ex.format = format;
  switch (format) {
    case SftFormat::text: {
      const std::string key(text_field);
      ex.text = c.string(c.field(record, "", key.c_str()), key);
      return ex;
    }
    case SftFormat::alpaca: return alpaca(record, c, std::move(ex));
    case SftFormat::sharegpt: return sharegpt(record, c, std::move(ex));
    case SftFormat::messages:
      c.messages(c.field(record, "", "messages"), "messages");
      ex.messages = record.at("messages");
      ex.tools = c.tools(record);
      return ex;
    case SftFormat::prompt_completion: return prompt_completion(record, c, std::move(ex));
    case SftFormat::preference: return preference(record, c, std::move(ex));
    case SftFormat::unpaired_preference: return unpaired_preference(record, c, std::move(ex));
    case SftFormat::auto_detect: break;
  }
  FG_ASSERT(false, "unreachable");
}

}  // namespace fitgrad::data
