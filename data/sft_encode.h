// Instruction and chat examples (data/sft_formats.h) to token ids with loss masks: `ids` and,
// for each token, whether it is a target the loss learns (`trained`). The mask says which
// tokens are predicted, not which are read: the trainer shifts it with the targets, so token i
// is learned from the logits at position i - 1.
//
//   SftEncoder encoder(tok, &chat_template, "SmolLM2-135M-Instruct", {.max_length = 2048});
//   SftTokens t = encoder.encode(example);
//   if (t.num_trained == 0) ...   // the caller reports it (e.g. cut away by max_length)
//
// How each kind of example becomes tokens (Note [Loss masks from prefix renderings] in
// sft_encode.cpp):
//   conversation (alpaca, sharegpt, messages): the whole conversation rendered by the chat
//     template (add_generation_prompt false) and tokenized as transformers'
//     apply_chat_template(tokenize=True) does: special tokens' texts become their ids and the
//     tokenizer adds nothing (the template writes bos). train_on assistant trains, for each
//     assistant message k, the tokens between the renderings of messages[:k] with the
//     generation prompt and of messages[:k + 1]; last, those of the last assistant message
//     only; all, every token.
//   prompt_completion: as TRL's SFTTrainer: the prompt untrained, the rest trained. Plain
//     strings: [bos] + tokenize(prompt) and [bos] + tokenize(prompt + completion) + [eos].
//     Messages: the prompt rendered with the generation prompt (whatever its last role, as
//     SFTTrainer does), the whole rendering of prompt + completion.
//   text: [bos] + tokenize(text) + [eos], every token trained.
// [bos] is the tokenizer's bos when it has one and options.add_bos; [eos] its eos when it has
// one and the text does not already end with it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "data/chat_template.h"
#include "data/sft_formats.h"
#include "data/tokenizer.h"

namespace fitgrad::data {

// Which tokens of a conversation the loss learns (--train_on).
enum class TrainOn {
  assistant,  // every assistant message (and its end-of-turn tokens)
  all,        // every token
  last,       // the last assistant message only
};

std::string_view train_on_name(TrainOn train_on);
// "assistant", "all" or "last"; throws fitgrad::Error naming the value and the choices.
TrainOn parse_train_on(std::string_view name);

struct SftEncodeOptions {
  TrainOn train_on = TrainOn::assistant;
  // Keep at most this many tokens, cutting from the right (0: no limit).
  int64_t max_length = 0;
  // Whether text and plain prompt_completion examples start with the tokenizer's bos, as
  // transformers' tokenizer(text) does for tokenizers whose post-processor adds one (Llama,
  // Mistral, Gemma). Turn it off for a tokenizer whose bos role is not added to a text
  // (SmolLM2 names <|im_start|> its bos_token).
  bool add_bos = true;
  // The chat template's variables besides messages, tools and add_generation_prompt (e.g.
  // date_string, enable_thinking). bos_token and eos_token, when absent here, are the texts
  // of the tokenizer's bos and eos, as transformers passes its special tokens.
  nlohmann::ordered_json template_variables = nlohmann::ordered_json::object();
};

struct SftTokens {
  std::vector<int32_t> ids;
  std::vector<uint8_t> trained;  // 1 where the loss learns ids[i], else 0; ids.size() flags
  int64_t num_trained = 0;       // the 1s of `trained`
  int64_t truncated = 0;         // tokens cut away by max_length
};

class SftEncoder {
 public:
  // `chat_template` may be null when no example is conversational; `model` names the model
  // or tokenizer in errors. The tokenizer and template must outlive the encoder.
  SftEncoder(const Tokenizer& tok, const ChatTemplate* chat_template, std::string model,
             SftEncodeOptions options = {});

  // Throws fitgrad::Error starting "[sft <example.where>]" for a conversational example
  // without a chat template, a template that fails (ChatTemplateRaised for its
  // raise_exception), or a mask that prefix renderings cannot give (naming the message).
  SftTokens encode(const SftExample& example) const;

  const SftEncodeOptions& options() const { return options_; }

 private:
  SftTokens conversation(const SftExample& ex) const;
  SftTokens chat_prompt_completion(const SftExample& ex) const;
  SftTokens plain_prompt_completion(const SftExample& ex) const;
  SftTokens text(const SftExample& ex) const;

  std::string render(const SftExample& ex, const nlohmann::ordered_json& messages,
                     bool add_generation_prompt) const;
  std::vector<int32_t> plain_ids(std::string_view text, bool eos) const;

  const Tokenizer& tok_;
  const ChatTemplate* template_;
  std::string model_;
  SftEncodeOptions options_;
  nlohmann::ordered_json variables_;  // options_.template_variables with bos/eos filled in
};

}  // namespace fitgrad::data
