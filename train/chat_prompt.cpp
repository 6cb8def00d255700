// read_conversation, model_chat_template and chat_prompt (chat_prompt.h).
#include "train/chat_prompt.h"

#include <fmt/format.h>

#include "io/json_depth.h"
#include "io/whole_file.h"
#include "tensor/error.h"

namespace fitgrad::train {

Conversation read_conversation(const std::string& path, const char* command) {
  const std::string text = io::read_whole_file(command, "conversation file", path);
  nlohmann::ordered_json j;
  try {
    j = io::parse_json<nlohmann::ordered_json>(text, fmt::format("[{}] {}:", command, path));
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(fmt::format("[{}] {} is not JSON: {}", command, path, e.what()));
  }
  return conversation_of(j, path, command);
}

Conversation conversation_of(const nlohmann::ordered_json& j, const std::string& path,
                             const char* command) {
  Conversation c;
  if (j.is_object()) {
    FG_CHECK(j.contains("messages"),
             "[{}] {} is an object without \"messages\" (a conversation is a list of messages, "
             "or an object with \"messages\" and the template's other variables)",
             command, path);
    c.messages = j.at("messages");
    for (const auto& [key, value] : j.items())
      if (key != "messages") c.extra[key] = value;
  } else {
    c.messages = j;
  }
  FG_CHECK(c.messages.is_array() && !c.messages.empty(),
           "[{}] {}: \"messages\" must be a non-empty list of {{\"role\", \"content\"}}", command,
           path);
  for (size_t i = 0; i < c.messages.size(); ++i) {
    const nlohmann::ordered_json& m = c.messages[i];
    FG_CHECK(m.is_object() && m.contains("role") && m.at("role").is_string(),
             "[{}] {}: message {} has no string \"role\"", command, path, i);
  }
  return c;
}

data::ChatTemplate model_chat_template(const LoadedModel& loaded, const std::string& override_file,
                                       const std::string& spec, const char* command) {
  if (!override_file.empty())
    return data::ChatTemplate::parse(io::read_whole_file(command, "chat template", override_file),
                                     override_file);
  const nlohmann::json& v = loaded.tokenizer_vocabulary;
  FG_CHECK(v.is_object() && v.contains("chat_template") && v.at("chat_template").is_string(),
           "[{}] {} has no chat template (its tokenizer_config.json, chat_template.jinja or GGUF "
           "tokenizer.chat_template would carry one); give one with --chat_template FILE",
           command, spec);
  return data::ChatTemplate::parse(v.at("chat_template").get<std::string>(), spec);
}

std::string chat_prompt(const data::ChatTemplate& chat, const Conversation& conversation,
                        const data::Tokenizer& tok) {
  nlohmann::ordered_json extra = conversation.extra;
  const auto text_of = [&](std::optional<int32_t> id) {
    return id ? tok.decode({*id}) : std::string();
  };
  if (!extra.contains("bos_token")) extra["bos_token"] = text_of(tok.bos());
  if (!extra.contains("eos_token")) extra["eos_token"] = text_of(tok.eos());
  return chat.render(data::chat_context(conversation.messages, true, extra)).text;
}

}  // namespace fitgrad::train
