// `fitgrad generate` (generate.h).
#include "apps/generate.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "apps/cli_checks.h"
#include "apps/guard.h"
#include "data/hf_tokenizer.h"
#include "io/whole_file.h"
#include "tensor/error.h"
#include "tensor/memory/bytes.h"
#include "tensor/memory/caching_allocator.h"
#include "train/chat_prompt.h"
#include "train/model_source.h"

namespace fitgrad::apps {

using train::chat_prompt;
using train::Conversation;
using train::generate_after;
using train::GenerateStats;
using train::kChatTemplateHelp;
using train::LoadedModel;
using train::model_chat_template;
using train::read_conversation;

namespace {

std::string read_prompt(const GenerateOptions& o) {
  FG_CHECK(!o.prompt.empty() || !o.prompt_file.empty(),
           "[generate] give the prompt with --prompt TEXT, --prompt_file PATH or --messages FILE");
  FG_CHECK(o.prompt.empty() || o.prompt_file.empty(),
           "[generate] give either --prompt or --prompt_file, not both");
  if (!o.prompt.empty()) return o.prompt;
  return io::read_whole_file("generate", "prompt file", o.prompt_file);
}

}  // namespace

namespace {

LoadedModel load_for_generate(const GenerateOptions& o) {
  LoadedModel loaded = load_inference_model("generate", o);
  FG_CHECK(loaded.tokenizer,
           "[generate] {} has no tokenizer to decode with (on meta, text is "
           "neither read nor made)",
           o.model);
  return loaded;
}

}  // namespace

train::DecodeOptions decode_options(const GenerateOptions& o) {
  return {Device::parse(o.device),
          inference_dtype("generate", o.dtype),
          o.seed,
          o.max_new_tokens,
          o.sampling,
          o.no_kv_cache};
}

GenerateStats generate(const GenerateOptions& o, std::ostream& out) {
  o.sampling.validate();
  FG_CHECK(!o.max_new_tokens || (*o.max_new_tokens > 0 && *o.max_new_tokens <= (int64_t(1) << 31)),
           "[generate] --max_new_tokens must be positive and at most 2^31, got {}",
           o.max_new_tokens.value_or(0));
  inference_dtype("generate", o.dtype);
  if (!o.messages_file.empty()) {  // a conversation through the model's chat template
    FG_CHECK(o.prompt.empty() && o.prompt_file.empty(),
             "[generate] give either --messages or --prompt / --prompt_file, not both");
    const Conversation conversation = read_conversation(o.messages_file, "generate");
    const LoadedModel loaded = load_for_generate(o);
    const data::ChatTemplate chat =
        model_chat_template(loaded, o.chat_template, o.model, "generate");
    const std::string prompt = chat_prompt(chat, conversation, *loaded.tokenizer);
    allocator_for(Device::parse(o.device)).reset_peak_stats();
    return generate_after(loaded, decode_options(o),
                          loaded.tokenizer->encode(prompt, /*allow_special=*/true), out);
  }
  const std::string prompt = read_prompt(o);
  const LoadedModel loaded = load_for_generate(o);
  allocator_for(Device::parse(o.device)).reset_peak_stats();
  // The bos where transformers' tokenizer(prompt) puts it; a chat template above writes its own.
  return generate_after(loaded, decode_options(o),
                        data::text_ids(*loaded.tokenizer, loaded.tokenizer_vocabulary, prompt,
                                       /*allow_special=*/true),
                        out);
}

// Note [Chat in the terminal]
// `generate --chat` holds a conversation: each line read is a user turn (a --messages file
// may start the conversation, its system turn included), the whole conversation is rendered
// through the chat template with the generation prompt, and the reply, streamed as it is
// sampled and ended at the model's stop ids (Note [Stop tokens]), joins the conversation as
// the assistant's turn. An empty line or the end of the input ends it. Each turn re-reads the
// conversation into a fresh KV cache: simple, and at chat lengths the prefill is a small part
// of a reply's time.
int64_t chat(const GenerateOptions& o, std::istream& in, std::ostream& out, std::ostream& log) {
  o.sampling.validate();
  FG_CHECK(o.prompt.empty() && o.prompt_file.empty(),
           "[generate] --chat reads the user's turns from the terminal; --prompt and "
           "--prompt_file do not apply (a --messages file may start the conversation)");
  Conversation conversation;
  if (!o.messages_file.empty()) conversation = read_conversation(o.messages_file, "generate");
  const LoadedModel loaded = load_for_generate(o);
  const data::ChatTemplate chat = model_chat_template(loaded, o.chat_template, o.model, "generate");
  int64_t turns = 0;
  std::string line;
  while (true) {
    log << "> " << std::flush;
    if (!std::getline(in, line) || line.empty()) break;
    conversation.messages.push_back({{"role", "user"}, {"content", line}});
    const std::string prompt = chat_prompt(chat, conversation, *loaded.tokenizer);
    std::string reply;
    allocator_for(Device::parse(o.device)).reset_peak_stats();
    const GenerateStats stats =
        generate_after(loaded, decode_options(o),
                       loaded.tokenizer->encode(prompt, /*allow_special=*/true), out, &reply);
    out << std::endl;
    log << stats_line(stats) << std::endl;
    conversation.messages.push_back({{"role", "assistant"}, {"content", reply}});
    ++turns;
  }
  return turns;
}

std::string stats_line(const GenerateStats& s) {
  const double per_s = s.decode_seconds > 0 ? double(s.new_tokens) / s.decode_seconds : 0.0;
  return fmt::format(
      "[generate] prompt tokens: {}, new tokens: {} (stop: {}), prefill: {:.1f} ms, decode: "
      "{:.2f} tokens/s, peak memory: {}",
      s.prompt_tokens, s.new_tokens, s.stop_reason, s.prefill_seconds * 1e3, per_s,
      format_bytes(s.peak_bytes));
}

void add_generate_command(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "generate", "Generate text from a model (preset, config.json, checkpoint dir or .gguf)");
  add_inference_model_options(*cmd, *o);
  cmd->add_option("--prompt", o->prompt, "the prompt text");
  cmd->add_option("--prompt_file", o->prompt_file, "a file holding the prompt");
  cmd->add_option("--messages", o->messages_file,
                  "a JSON conversation (a list of {role, content}, or an object with messages and "
                  "the template's variables) rendered through the model's chat template");
  cmd->add_option("--chat_template", o->chat_template, kChatTemplateHelp);
  cmd->add_flag("--chat", o->interactive,
                "hold a conversation: each line of the input is a user turn (an empty line ends "
                "it)");
  cmd->add_option_function<int64_t>(
      "--max_new_tokens", [o](const int64_t& n) { o->max_new_tokens = n; },
      "tokens to generate, 1 to 2^31 (default 64, clamped to the model's context)");
  cmd->add_option("--temperature", o->sampling.temperature,
                  "softmax temperature; 0 = greedy (default 1.0)");
  cmd->add_option("--top_k", o->sampling.top_k,
                  "keep the k most probable tokens; 0 = off (default 0)");
  cmd->add_option("--top_p", o->sampling.top_p,
                  "nucleus sampling: keep the smallest set of probability >= top_p; in (0, 1] "
                  "(default 1.0)");
  cmd->add_option("--seed", o->seed, "seed of the sampling draws and of a random init (default 0)")
      ->check(u64_digits());
  cmd->add_flag("--no_kv_cache", o->no_kv_cache,
                "re-run the whole sequence for every token (slow; for comparison)");
  cmd->callback([o] {
    const int code = run_guarded(
        "generate", std::cout, std::cerr,
        [&] {
          if (o->interactive) {
            chat(*o, std::cin, std::cout, std::cerr);
            return 0;
          }
          const GenerateStats stats = generate(*o, std::cout);
          std::cout << std::endl;
          if (stats.clamped_to > 0)
            std::cerr << "note: --max_new_tokens defaulted to " << stats.clamped_to
                      << ", what the model's context leaves after the prompt" << std::endl;
          std::cerr << stats_line(stats) << std::endl;
          return 0;
        },
        "the text above is what it generated");
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace fitgrad::apps
