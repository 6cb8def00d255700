// `fitgrad generate`: text from a model (a preset, a config.json, a checkpoint directory or
// a GGUF file; apps/model_source.h) given a prompt, with temperature, top-k and top-p
// sampling from a seed (nn/sampling.h) and a KV cache (nn/kv_cache.h).
//
// Note [Streaming decoded text]
// Each new token's bytes are written to the output as soon as it is sampled, except a
// trailing incomplete UTF-8 character, held back until the bytes that complete it arrive
// (a byte-level token may be a third of a character); bytes that can never form a
// character are written as they are. The prompt is not echoed. The special-token texts of
// the tokenizer in the prompt become their ids (so a chat template can be written out),
// and generation stops early at the tokenizer's eos token, which is not printed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <istream>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "apps/inference_model.h"
#include "nn/sampling.h"

namespace CLI {
class App;
}

namespace fitgrad::apps {

// Writes bytes to a stream as Note [Streaming decoded text] says.
class Utf8Stream {
 public:
  explicit Utf8Stream(std::ostream& out) : out_(out) {}
  // Appends bytes; writes (and flushes) all but an unfinished trailing character.
  void write(const std::string& bytes);
  // Writes whatever is held back.
  void finish();

 private:
  size_t incomplete_tail() const;
  std::ostream& out_;
  std::string pending_;
};

// The model options (inference_model.h), then generation's own; seed also seeds sampling.
struct GenerateOptions : InferenceModelOptions {
  std::string prompt;       // exactly one of prompt, prompt_file and messages_file
  std::string prompt_file;  //
  // A conversation file (apps/chat_prompt.h) rendered through the chat template: the model's,
  // or chat_template's file when given.
  std::string messages_file;
  std::string chat_template;
  bool interactive = false;  // --chat: Note [Chat in the terminal] in generate.cpp
  // Tokens to generate, in [1, 2^31] (any other value, -1 included, is refused); unset: 64,
  // clamped to what the model's context leaves after the prompt (GenerateStats::clamped_to
  // says when it was).
  std::optional<int64_t> max_new_tokens;
  nn::SamplingOptions sampling;
  // Re-run the whole sequence for every new token instead of using the KV cache (the
  // reference the cache is timed and tested against).
  bool no_kv_cache = false;
};

struct GenerateStats {
  int64_t prompt_tokens = 0;
  int64_t new_tokens = 0;
  double prefill_seconds = 0;  // the prompt's forward
  double decode_seconds = 0;   // every later forward and every sampling step
  int64_t peak_bytes = 0;      // the device allocator's peak of allocated bytes
  std::string stop_reason;     // "max_new_tokens" or "eos"
  int64_t clamped_to = 0;      // > 0: the default 64 new tokens did not fit; this many did
};

// Generates after `ids` (a prompt's tokens) with `loaded`'s model as it is (a training run's
// too), streaming the text to `out`; *text, when given, receives the generated text without
// the stop token. The stats' peak is the device allocator's, which the caller resets.
GenerateStats generate_after(const LoadedModel& loaded, const GenerateOptions& options,
                             std::vector<int32_t> ids, std::ostream& out,
                             std::string* text = nullptr);

// Loads the model, generates and streams the text to `out`; throws fitgrad::Error
// ("[generate] ...") for bad options, and the loaders' errors. Every ok option value is
// checked before the model is loaded.
GenerateStats generate(const GenerateOptions& options, std::ostream& out);

// Note [Chat in the terminal]: user turns from `in`, replies to `out`, prompts and each
// reply's stats line to `log`; returns the turns held.
int64_t chat(const GenerateOptions& options, std::istream& in, std::ostream& out,
             std::ostream& log);

// The one-line summary written to stderr after the text.
std::string stats_line(const GenerateStats& stats);

// Registers the `generate` subcommand; its callback prints "error: ..." and exits 1 on a
// fitgrad::Error.
void add_generate_command(CLI::App& app);

}  // namespace fitgrad::apps
