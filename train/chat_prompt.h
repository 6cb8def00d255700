// The prompt of a conversation: a model's chat template (or --chat_template FILE) rendered over
// messages with the generation prompt, as transformers' apply_chat_template(messages,
// add_generation_prompt=True) writes it, for `generate --messages` and `generate --chat`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "data/chat_template.h"
#include "train/model_source.h"

namespace fitgrad::train {

// A conversation file: a JSON list of messages ({"role", "content", ...}), or an object with
// "messages" and any other variables its template reads ("tools", "documents",
// "enable_thinking", ...).
struct Conversation {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
};

// The help of --chat_template, which generate and train take.
inline constexpr const char* kChatTemplateHelp =
    "a Jinja chat template file used instead of the model's own";

// Reads and checks a conversation file; errors name `command` and the file.
Conversation read_conversation(const std::string& path, const char* command);
// Checks a conversation given as JSON (a list of messages or an object with "messages");
// errors name `command` and `where` (a file, or a file and line).
Conversation conversation_of(const nlohmann::ordered_json& j, const std::string& where,
                             const char* command);

// The chat template: the file `override_file` when given, else the one the model's tokenizer
// carries (Note [A folder's chat template] in model_source.cpp). A model without one is an
// error naming `spec` and the flag that gives one.
data::ChatTemplate model_chat_template(const LoadedModel& loaded, const std::string& override_file,
                                       const std::string& spec, const char* command);

// The template over the conversation with add_generation_prompt, bos_token and eos_token set
// to the tokenizer's special-token texts (empty when it has none).
std::string chat_prompt(const data::ChatTemplate& chat, const Conversation& conversation,
                        const data::Tokenizer& tok);

}  // namespace fitgrad::train
