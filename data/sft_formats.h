// The record formats of instruction and chat datasets (supervised fine-tuning): one JSON object
// of a dataset file turned into what it means, an SftExample, which data/sft_encode.h turns
// into token ids and loss masks. data/sft_records.h reads the files; this file knows the
// formats, detects them and checks each record field by field.
//
//   text               {"text": "..."} (the field named by text_field): every token trained.
//   alpaca             {"instruction", "input"?, "output", "system"?, "history"?}: a
//                      conversation (Note [Alpaca records] in sft_formats.cpp).
//   sharegpt           {"conversations": [{"from", "value"}...], "system"?, "tools"?}: a
//                      conversation, its role names mapped (Note [ShareGPT roles]).
//   messages           {"messages": [{"role", "content", ...}...], "tools"?}: a conversation
//                      as transformers' apply_chat_template takes it, every key of a message
//                      kept (tool_calls, reasoning_content, name...).
//   prompt_completion  {"prompt", "completion", "tools"?}: two strings, or two message lists
//                      (TRL's SFTTrainer's prompt-completion datasets).
//   preference         {"prompt", "chosen", "rejected", "tools"?}: a prompt and two answers,
//                      three strings or three message lists (TRL's DPOTrainer's explicit-prompt
//                      preference datasets), for --objective dpo and orpo.
//   unpaired_preference {"prompt", "completion", "label", "tools"?}: a prompt_completion
//                      record and whether its completion is desirable (label true) or not
//                      (false): TRL's KTOTrainer's unpaired preference datasets, for
//                      --objective kto.
//
// Detection looks at the keys of one record, in this order: "messages", "conversations",
// "prompt" with "chosen" and "rejected", "prompt" with "completion" and "label", "prompt" with
// "completion", "instruction", then
// text_field.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

namespace fitgrad::data {

enum class SftFormat {
  auto_detect,
  text,
  alpaca,
  sharegpt,
  messages,
  prompt_completion,
  preference,
  unpaired_preference
};

// "auto", "text", "alpaca", "sharegpt", "messages", "prompt_completion", "preference",
// "unpaired_preference".
std::string_view sft_format_name(SftFormat format);
// The inverse, for --dataset_format; throws fitgrad::Error naming the value and the choices.
SftFormat parse_sft_format(std::string_view name);

// One record's meaning. Which fields are set depends on the format and on conversational().
struct SftExample {
  // Names the record in errors: "data/chat.jsonl line 12" or "data/chat.json index 3".
  std::string where;
  SftFormat format = SftFormat::text;
  // text: the text. prompt_completion of strings: the prompt.
  std::string text;
  // prompt_completion of strings: the completion.
  std::string completion;
  // alpaca, sharegpt, messages: the whole conversation. prompt_completion of messages: the
  // prompt's messages. Otherwise null.
  nlohmann::ordered_json messages;
  // prompt_completion of messages: the completion's messages; otherwise null.
  nlohmann::ordered_json completion_messages;
  // preference: the chosen answer is `completion` or `completion_messages`, the rejected one
  // this string or these messages.
  std::string rejected;
  nlohmann::ordered_json rejected_messages;
  // unpaired_preference: whether the completion is desirable (the record's "label").
  bool label = false;
  // The tool schemas passed to the chat template as `tools`, or null.
  nlohmann::ordered_json tools;

  // Whether the example is rendered with a chat template (messages is a list).
  bool conversational() const { return messages.is_array(); }
};

// A preference example's two answers, each as a prompt_completion example of the same prompt
// (and tools): {chosen, rejected}.
std::pair<SftExample, SftExample> preference_answers(const SftExample& pair);
// An unpaired example's completion and a mismatched one, `other`'s completion after its prompt
// (KTO's KL estimate, Note [KTO's mismatched completions] in train/objectives/kto.h), each as a
// prompt_completion example; throws fitgrad::Error when one holds strings and the other
// messages.
std::pair<SftExample, SftExample> unpaired_answers(const SftExample& example,
                                                   const SftExample& other);

// The format a record's keys say, or auto_detect when they fit none.
SftFormat detect_sft_format(const nlohmann::ordered_json& record, std::string_view text_field);

// The example `record` means in `format` (not auto_detect). `where` names the record; `why`
// says where the format came from ("forced by --dataset_format", "detected from line 1").
// Throws fitgrad::Error "[sft <where>] field '<path>': <what is wrong>; <the fix>" for a
// record that is not an object, a missing or wrongly typed field, an unknown role or an empty
// conversation.
SftExample sft_example_from_json(const nlohmann::ordered_json& record, SftFormat format,
                                 std::string_view text_field, const std::string& where,
                                 const std::string& why);

}  // namespace fitgrad::data
