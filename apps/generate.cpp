// `fitgrad generate` (generate.h).
#include "apps/generate.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>

#include "apps/chat_prompt.h"
#include "apps/cli_checks.h"
#include "apps/guard.h"
#include "apps/model_source.h"
#include "autograd/grad_mode.h"
#include "nn/kv_cache.h"
#include "nn/lora.h"
#include "nn/lora_adapter.h"
#include "nn/nf4_linear.h"
#include "nn/target_modules.h"
#include "tensor/error.h"
#include "tensor/memory/bytes.h"
#include "tensor/memory/caching_allocator.h"

namespace fitgrad::apps {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string read_prompt(const GenerateOptions& o) {
  FG_CHECK(!o.prompt.empty() || !o.prompt_file.empty(),
           "[generate] give the prompt with --prompt TEXT, --prompt_file PATH or --messages FILE");
  FG_CHECK(o.prompt.empty() || o.prompt_file.empty(),
           "[generate] give either --prompt or --prompt_file, not both");
  if (!o.prompt.empty()) return o.prompt;
  return read_whole_file("generate", "prompt file", o.prompt_file);
}

// The logits of the last position of (1, T, V) as a (V) tensor.
Tensor last_logits(const Tensor& logits) {
  return logits.select(0, 0).select(0, logits.size(1) - 1);
}

Tensor ids_tensor(const std::vector<int32_t>& ids, Device device) {
  return Tensor::from_vector(ids, {1, int64_t(ids.size())}, DType::i32).to(device);
}

}  // namespace

void Utf8Stream::write(const std::string& bytes) {
  pending_ += bytes;
  const size_t keep = incomplete_tail();
  out_.write(pending_.data(), std::streamsize(pending_.size() - keep));
  out_.flush();
  pending_.erase(0, pending_.size() - keep);
}

void Utf8Stream::finish() {
  out_ << pending_;
  out_.flush();
  pending_.clear();
}

// The bytes from the last lead byte on when they are fewer than its sequence needs (an
// unfinished character); 0 when the end is complete. An invalid prefix held here is
// written once a later byte shows it cannot continue.
size_t Utf8Stream::incomplete_tail() const {
  const size_t n = pending_.size();
  for (size_t back = 1; back <= std::min<size_t>(4, n); ++back) {
    const auto b = uint8_t(pending_[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

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

GenerateStats generate_after(const LoadedModel& loaded, const GenerateOptions& o,
                             std::vector<int32_t> ids, std::ostream& out, std::string* text) {
  const nn::CausalLM& model = *loaded.model;
  const data::Tokenizer& tok = *loaded.tokenizer;
  const Device device = Device::parse(o.device);
  const DType dtype = inference_dtype("generate", o.dtype);
  if (ids.empty() && tok.bos()) ids.push_back(*tok.bos());
  FG_CHECK(!ids.empty(), "[generate] the prompt is empty");
  const int64_t context = model.config().max_position_embeddings;
  GenerateStats stats;
  int64_t max_new = o.max_new_tokens.value_or(0);
  if (!o.max_new_tokens) {  // the default: 64, or what the context leaves
    constexpr int64_t kDefault = 64;
    const int64_t room = context - int64_t(ids.size()) + 1;
    max_new = std::min(kDefault, room);
    if (max_new < kDefault && max_new > 0) stats.clamped_to = max_new;
  }
  FG_CHECK(max_new > 0 && int64_t(ids.size()) <= context,
           "[generate] the prompt's {} tokens fill the model's context of {} positions; "
           "shorten the prompt",
           ids.size(), context);
  const int64_t total = int64_t(ids.size()) + max_new - 1;  // the last is not fed
  FG_CHECK(total <= context,
           "[generate] {} prompt tokens + {} new tokens do not fit the model's context of {} "
           "positions; lower --max_new_tokens or shorten the prompt",
           ids.size(), max_new, context);

  autograd::NoGradGuard no_grad;
  CachingAllocator& allocator = allocator_for(device);
  Generator generator(o.seed);
  std::unique_ptr<nn::KvCache> cache;
  if (!o.no_kv_cache)
    cache = std::make_unique<nn::KvCache>(model.config(), 1, total, device, dtype);

  stats.prompt_tokens = int64_t(ids.size());
  stats.stop_reason = "max_new_tokens";
  Utf8Stream stream(out);
  auto t0 = Clock::now();
  Tensor logits = cache ? model.forward_cached(ids_tensor(ids, device), *cache)
                        : model.forward(ids_tensor(ids, device));
  stats.prefill_seconds = seconds_since(t0);
  t0 = Clock::now();
  for (int64_t i = 0; i < max_new; ++i) {
    const int32_t next = nn::sample_token(last_logits(logits), o.sampling, generator);
    // Note [Stop tokens] in model_source.cpp: the spec's, else the tokenizer's eos.
    const bool stop = loaded.stop_ids.empty()
                          ? tok.eos() && next == *tok.eos()
                          : std::find(loaded.stop_ids.begin(), loaded.stop_ids.end(), next) !=
                                loaded.stop_ids.end();
    if (stop) {
      stats.stop_reason = "eos";
      break;
    }
    ++stats.new_tokens;
    ids.push_back(next);
    const std::string piece = tok.decode_continuation({next});
    stream.write(piece);
    if (text) *text += piece;
    if (i + 1 == max_new) break;
    logits = cache ? model.forward_cached(ids_tensor({next}, device), *cache)
                   : model.forward(ids_tensor(ids, device));
  }
  stream.finish();
  stats.decode_seconds = seconds_since(t0);
  stats.peak_bytes = allocator.stats().allocated_bytes[kAllPools].peak;
  return stats;
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
    return generate_after(loaded, o, loaded.tokenizer->encode(prompt, /*allow_special=*/true), out);
  }
  const std::string prompt = read_prompt(o);
  const LoadedModel loaded = load_for_generate(o);
  allocator_for(Device::parse(o.device)).reset_peak_stats();
  return generate_after(loaded, o, loaded.tokenizer->encode(prompt, /*allow_special=*/true), out);
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
    const GenerateStats stats = generate_after(
        loaded, o, loaded.tokenizer->encode(prompt, /*allow_special=*/true), out, &reply);
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
