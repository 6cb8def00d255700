// SftEncoder: render, tokenize and mask each kind of example (data/sft_encode.h), checking
// that every mask boundary is where the prefix renderings say it is.
#include "data/sft_encode.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <utility>

#include "tensor/error.h"

namespace fitgrad::data {
namespace {

using json = nlohmann::ordered_json;

// Note [Loss masks from prefix renderings]
// Which tokens of a rendered conversation belong to assistant message k? Searching the tokens
// for markers ("<|im_start|>assistant\n") breaks on every template that spells them otherwise,
// on markers inside content, and on tokenizers that split the marker text. Instead the
// template itself says: render(messages[:k], add_generation_prompt=True) is everything up to
// where the model starts answering, render(messages[:k + 1]) everything up to the end of its
// answer (end-of-turn tokens included, since the model must learn to stop), so the answer is
// the tokens between the two. This holds only when both renderings are character prefixes of
// the whole conversation's rendering (a template that rewrites earlier turns, like Qwen3's
// dropping of past reasoning, breaks it) and their tokens are token prefixes of the whole
// token list (a BPE merge across the boundary breaks it). Both are checked for every
// boundary, and a failure is an error naming the example and the message that suggests
// --train_on all, never a silently wrong mask. A prompt-completion example has one boundary,
// the end of its prompt, checked the same way (TRL's SFTTrainer only warns there, and trains
// from where the token lists diverge). train_on all needs no boundary and so no check.
//
// Note [Tokenizing like transformers]
// apply_chat_template(tokenize=True) calls the tokenizer with add_special_tokens=False: the
// texts of special tokens in the rendering become their ids and nothing is added, since the
// template writes bos itself. Plain text (text examples, plain prompts and completions) goes
// through tokenizer(text) with add_special_tokens=True, as TRL does: special tokens' texts are
// recognized there too, and the post-processor's bos comes first (options.add_bos with the bos
// role stands for it). TRL appends the eos token's text to the text before tokenizing when the
// text does not end with it; appending the eos id to the ids when they do not end with it is
// the same.

constexpr std::array<std::pair<TrainOn, const char*>, 3> kTrainOn = {{
    {TrainOn::assistant, "assistant"},
    {TrainOn::all, "all"},
    {TrainOn::last, "last"},
}};

json first_messages(const json& messages, size_t n) {
  json out = json::array();
  for (size_t i = 0; i < n; ++i) out.push_back(messages[i]);
  return out;
}

// The byte or element where a and b first differ.
template <class A, class B>
size_t mismatch_at(const A& a, const B& b) {
  const size_t n = std::min(a.size(), b.size());
  return size_t(std::mismatch(a.begin(), a.begin() + ptrdiff_t(n), b.begin()).first - a.begin());
}

// How a prefix rendering is described in errors.
std::string prefix_name(size_t n, bool generation_prompt) {
  return fmt::format("messages[:{}]{}", n, generation_prompt ? " with the generation prompt" : "");
}

// The token count of `prefix`, a rendering of the first messages described by `what`, after
// checking that it is a character prefix of `full` and its tokens a prefix of `full_ids`.
size_t prefix_tokens(const Tokenizer& tok, const SftExample& ex, const std::string& full,
                     const std::vector<int32_t>& full_ids, const std::string& prefix,
                     const std::string& message, const std::string& what) {
  FG_CHECK(full.starts_with(prefix),
           "[sft {}] {}: the chat template renders {} as text that is not a prefix of the whole "
           "conversation's (they differ at byte {}): the template rewrites earlier turns, so the "
           "tokens to train cannot be told apart; train on every token with --train_on all",
           ex.where, message, what, mismatch_at(prefix, full));
  const std::vector<int32_t> ids = tok.encode(prefix, true);
  FG_CHECK(ids.size() <= full_ids.size() && mismatch_at(ids, full_ids) == ids.size(),
           "[sft {}] {}: the tokens of {} are not a prefix of the whole conversation's (they "
           "differ at token {}): the tokenizer merges text across the boundary, so the tokens "
           "to train cannot be told apart; train on every token with --train_on all",
           ex.where, message, what, mismatch_at(ids, full_ids));
  return ids.size();
}

std::string role_of(const json& message) { return message.at("role").get<std::string>(); }

}  // namespace

std::string_view train_on_name(TrainOn train_on) {
  for (const auto& [t, name] : kTrainOn)
    if (t == train_on) return name;
  FG_ASSERT(false, "unknown TrainOn {}", int(train_on));
}

TrainOn parse_train_on(std::string_view name) {
  for (const auto& [t, n] : kTrainOn)
    if (name == n) return t;
  throw Error(fmt::format("[sft] unknown train_on '{}'; use assistant, all or last", name));
}

SftEncoder::SftEncoder(const Tokenizer& tok, const ChatTemplate* chat_template, std::string model,
                       SftEncodeOptions options)
    : tok_(tok),
      template_(chat_template),
      model_(std::move(model)),
      options_(std::move(options)),
      variables_(options_.template_variables) {
  FG_CHECK(options_.max_length >= 0, "[sft] max_length {} is negative; use 0 for no limit",
           options_.max_length);
  FG_CHECK(variables_.is_object(), "[sft] the chat template variables must be a JSON object");
  if (!variables_.contains("bos_token") && tok_.bos())
    variables_["bos_token"] = tok_.decode({*tok_.bos()});
  if (!variables_.contains("eos_token") && tok_.eos())
    variables_["eos_token"] = tok_.decode({*tok_.eos()});
}

SftTokens SftEncoder::encode(const SftExample& ex) const {
  FG_CHECK(ex.format != SftFormat::preference,
           "[sft {}] a preference record (prompt, chosen, rejected) trains with --objective dpo "
           "or orpo, each answer encoded as a completion of the prompt",
           ex.where);
  SftTokens out;
  if (ex.conversational()) {
    FG_CHECK(template_ != nullptr,
             "[sft {}] a {} example is a conversation and needs a chat template, but {} has "
             "none; pass one with --chat_template FILE",
             ex.where, sft_format_name(ex.format), model_);
    out = ex.format == SftFormat::prompt_completion ? chat_prompt_completion(ex) : conversation(ex);
  } else {
    out = ex.format == SftFormat::prompt_completion ? plain_prompt_completion(ex) : text(ex);
  }
  FG_ASSERT(out.ids.size() == out.trained.size());
  const auto limit = size_t(options_.max_length);
  if (limit > 0 && out.ids.size() > limit) {
    out.truncated = int64_t(out.ids.size() - limit);
    out.ids.resize(limit);
    out.trained.resize(limit);
  }
  out.num_trained = std::count(out.trained.begin(), out.trained.end(), uint8_t(1));
  return out;
}

std::string SftEncoder::render(const SftExample& ex, const json& messages,
                               bool add_generation_prompt) const {
  json extra = variables_;
  if (!ex.tools.is_null()) extra["tools"] = ex.tools;
  const std::string what = prefix_name(messages.size(), add_generation_prompt);
  try {
    return template_->render(chat_context(messages, add_generation_prompt, extra)).text;
  } catch (const ChatTemplateRaised& e) {
    throw ChatTemplateRaised(fmt::format("[sft {}] rendering {}: {}", ex.where, what, e.what()),
                             e.message());
  } catch (const Error& e) {
    throw Error(fmt::format("[sft {}] rendering {}: {}", ex.where, what, e.what()));
  }
}

SftTokens SftEncoder::conversation(const SftExample& ex) const {
  const json& messages = ex.messages;
  const std::string full = render(ex, messages, false);
  SftTokens out;
  out.ids = tok_.encode(full, true);
  const bool all = options_.train_on == TrainOn::all;
  out.trained.assign(out.ids.size(), all ? 1 : 0);
  if (all) return out;
  std::vector<size_t> assistants;
  for (size_t k = 0; k < messages.size(); ++k)
    if (role_of(messages[k]) == "assistant") assistants.push_back(k);
  if (options_.train_on == TrainOn::last && !assistants.empty())
    assistants.erase(assistants.begin(), assistants.end() - 1);
  for (const size_t k : assistants) {
    const std::string message = fmt::format("message {} (assistant)", k);
    const size_t begin =
        prefix_tokens(tok_, ex, full, out.ids, render(ex, first_messages(messages, k), true),
                      message, prefix_name(k, true));
    const size_t end =
        prefix_tokens(tok_, ex, full, out.ids, render(ex, first_messages(messages, k + 1), false),
                      message, prefix_name(k + 1, false));
    const json& content = messages[k].contains("content") ? messages[k].at("content") : json();
    FG_CHECK(end > begin || !content.is_string() ||
                 content.get<std::string>().find_first_not_of(" \t\r\n") == std::string::npos,
             "[sft {}] {}: the chat template renders it as no text ({} ends where {} does), so "
             "its answer has nothing to train: the template does not write assistant turns; give "
             "one that does with --chat_template FILE, or train on every token with --train_on "
             "all",
             ex.where, message, prefix_name(k + 1, false), prefix_name(k, true));
    std::fill(out.trained.begin() + ptrdiff_t(begin),
              out.trained.begin() + ptrdiff_t(std::max(begin, end)), uint8_t(1));
  }
  return out;
}

SftTokens SftEncoder::chat_prompt_completion(const SftExample& ex) const {
  const json& prompt = ex.messages;
  json messages = prompt;
  for (const json& m : ex.completion_messages) messages.push_back(m);
  const std::string full = render(ex, messages, false);
  SftTokens out;
  out.ids = tok_.encode(full, true);
  out.trained.assign(out.ids.size(), 1);
  if (options_.train_on == TrainOn::all) return out;
  // TRL's SFTTrainer renders the prompt with the generation prompt whatever its last role
  // (a prompt ending with an assistant message is context; the completion is a new turn).
  const std::string prompt_text = render(ex, prompt, true);
  const std::string what = fmt::format("the prompt ({})", prefix_name(prompt.size(), true));
  const size_t begin = prefix_tokens(tok_, ex, full, out.ids, prompt_text,
                                     fmt::format("message {} (completion)", prompt.size()), what);
  std::fill(out.trained.begin(), out.trained.begin() + ptrdiff_t(begin), uint8_t(0));
  return out;
}

std::vector<int32_t> SftEncoder::plain_ids(std::string_view text, bool eos) const {
  std::vector<int32_t> ids;
  if (options_.add_bos && tok_.bos()) ids.push_back(*tok_.bos());
  const std::vector<int32_t> body = tok_.encode(text, true);
  ids.insert(ids.end(), body.begin(), body.end());
  if (eos && tok_.eos() && (ids.empty() || ids.back() != *tok_.eos())) ids.push_back(*tok_.eos());
  return ids;
}

SftTokens SftEncoder::plain_prompt_completion(const SftExample& ex) const {
  SftTokens out;
  out.ids = plain_ids(ex.text + ex.completion, true);
  out.trained.assign(out.ids.size(), 1);
  if (options_.train_on == TrainOn::all) return out;
  const std::vector<int32_t> prompt = plain_ids(ex.text, false);
  FG_CHECK(prompt.size() <= out.ids.size() && mismatch_at(prompt, out.ids) == prompt.size(),
           "[sft {}] the tokens of the prompt are not a prefix of the tokens of prompt + "
           "completion (they differ at token {}): the tokenizer merges text across the "
           "boundary (white space at the prompt's end belongs at the completion's start), so "
           "the completion's tokens cannot be told apart; move it, or train on every token "
           "with --train_on all",
           ex.where, mismatch_at(prompt, out.ids));
  std::fill(out.trained.begin(), out.trained.begin() + ptrdiff_t(prompt.size()), uint8_t(0));
  return out;
}

SftTokens SftEncoder::text(const SftExample& ex) const {
  SftTokens out;
  out.ids = plain_ids(ex.text, true);
  out.trained.assign(out.ids.size(), 1);
  return out;
}

}  // namespace fitgrad::data
