// read_eval_prompts and complete_prompts (eval_prompts.h).
//
// Note [Prompts at evaluation]
// transformers' Trainer has no generation at evaluation (TRL's callbacks and axolotl add it);
// fitgrad's --eval_prompts follows their shape: after each evaluation the model, switched to
// eval mode, completes every prompt greedily through the KV cache, at most
// --eval_max_new_tokens tokens or up to its stop ids, and the run appends
// {"step", "eval_samples": [{"prompt", "completion"}, ...]} to metrics.jsonl and one line per
// prompt {"step", "prompt", "completion"} to eval_samples.jsonl in the output directory; a
// completion that is not UTF-8 (cut inside a character) is written with U+FFFD in its place
// and the record marked "invalid_utf8_replaced": true (Note [Invalid UTF-8 in written JSON] in
// io/json_file.h).
// Generation runs outside the step's autocast, with a KV cache in the parameters' dtype (bf16
// under --pure_bf16, else f32). A dry run generates nothing: how many tokens a completion
// takes is known only from the values, so its cache and logits are not in the plan; they are
// freed before the next step and smaller than a training step's activations for any prompt
// shorter than --seq_len x --per_device_train_batch_size.
#include "train/eval_prompts.h"

#include <fmt/format.h>

#include <sstream>

#include "data/hf_tokenizer.h"
#include "data/utf8.h"
#include "io/json_depth.h"
#include "io/whole_file.h"
#include "tensor/error.h"
#include "train/chat_prompt.h"
#include "train/decode.h"

namespace fitgrad::train {

std::vector<EvalPrompt> read_eval_prompts(const TrainArgs& a, const LoadedModel& lm) {
  FG_CHECK(lm.tokenizer, "[train] --eval_prompts needs a tokenizer; {} has none", a.model);
  std::istringstream lines(io::read_whole_file("train", "eval prompts file", a.eval_prompts));
  std::vector<EvalPrompt> prompts;
  std::optional<data::ChatTemplate> chat;
  std::string line;
  for (int64_t n = 1; std::getline(lines, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{} line {}", a.eval_prompts, n);
    nlohmann::ordered_json j;
    try {
      j = io::parse_json<nlohmann::ordered_json>(line,
                                                 fmt::format("[train] --eval_prompts {}:", where));
    } catch (const nlohmann::json::parse_error& e) {
      throw Error(fmt::format("[train] --eval_prompts {} is not JSON: {}", where, e.what()));
    }
    EvalPrompt p{where, "", {}};
    // A raw prompt starts with the bos where transformers' tokenizer(prompt) adds it; a
    // conversation's template writes its own (Note [The bos a text starts with] in
    // data/hf_tokenizer.cpp).
    if (j.is_object() && j.contains("prompt")) {
      FG_CHECK(j.at("prompt").is_string(), "[train] --eval_prompts {}: \"prompt\" is no string",
               where);
      p.text = j.at("prompt").get<std::string>();
      p.ids = data::text_ids(*lm.tokenizer, lm.tokenizer_vocabulary, p.text,
                             /*allow_special=*/true);
    } else {
      if (!chat) chat = model_chat_template(lm, a.chat_template, a.model, "train");
      p.text = chat_prompt(*chat, conversation_of(j, where, "train"), *lm.tokenizer);
      p.ids = lm.tokenizer->encode(p.text, /*allow_special=*/true);
    }
    const int64_t context = lm.model->config().max_position_embeddings;
    FG_CHECK(!p.ids.empty() && int64_t(p.ids.size()) + a.eval_max_new_tokens - 1 <= context,
             "[train] --eval_prompts {}: {} prompt tokens + --eval_max_new_tokens {} do not fit "
             "the model's context of {} positions",
             where, p.ids.size(), a.eval_max_new_tokens, context);
    prompts.push_back(std::move(p));
  }
  FG_CHECK(!prompts.empty(), "[train] --eval_prompts {} holds no prompt", a.eval_prompts);
  return prompts;
}

nlohmann::json complete_prompts(const TrainArgs& a, const LoadedModel& lm,
                                const std::vector<EvalPrompt>& prompts, int64_t max_new_tokens) {
  DecodeOptions o;
  o.device = Device::parse(a.device);
  o.dtype = a.pure_bf16 ? DType::bf16 : DType::f32;
  o.sampling.temperature = 0;  // greedy
  o.max_new_tokens = max_new_tokens;
  nlohmann::json samples = nlohmann::json::array();
  for (const EvalPrompt& p : prompts) {
    std::ostringstream sink;
    std::string completion;
    generate_after(lm, o, p.ids, sink, &completion);
    nlohmann::json sample{{"prompt", p.text}, {"completion", completion}};
    // Note [Invalid UTF-8 in written JSON] in io/json_file.h: the files get U+FFFD for it.
    if (!data::is_valid_utf8(p.text) || !data::is_valid_utf8(completion))
      sample["invalid_utf8_replaced"] = true;
    samples.push_back(std::move(sample));
  }
  return samples;
}

}  // namespace fitgrad::train
