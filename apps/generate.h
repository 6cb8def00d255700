// `fitgrad generate`: text from a model (a preset, a config.json, a checkpoint directory or
// a GGUF file; train/model_source.h) given a prompt, with temperature, top-k and top-p
// sampling from a seed (nn/sampling.h) and a KV cache (nn/kv_cache.h): the decoding of
// train/decode.h (Note [Streaming decoded text]) behind the command's flags.
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
#include "train/decode.h"

namespace CLI {
class App;
}

namespace fitgrad::apps {

// The model options (inference_model.h), then generation's own; seed also seeds sampling.
struct GenerateOptions : InferenceModelOptions {
  std::string prompt;       // exactly one of prompt, prompt_file and messages_file
  std::string prompt_file;  //
  // A conversation file (train/chat_prompt.h) rendered through the chat template: the model's,
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

// The options of the decoding itself (train/decode.h) that `o` gives.
train::DecodeOptions decode_options(const GenerateOptions& o);

// Loads the model, generates and streams the text to `out`; throws fitgrad::Error
// ("[generate] ...") for bad options, and the loaders' errors. Every ok option value is
// checked before the model is loaded.
train::GenerateStats generate(const GenerateOptions& options, std::ostream& out);

// Note [Chat in the terminal]: user turns from `in`, replies to `out`, prompts and each
// reply's stats line to `log`; returns the turns held.
int64_t chat(const GenerateOptions& options, std::istream& in, std::ostream& out,
             std::ostream& log);

// The one-line summary written to stderr after the text.
std::string stats_line(const train::GenerateStats& stats);

// Registers the `generate` subcommand; its callback prints "error: ..." and exits 1 on a
// fitgrad::Error.
void add_generate_command(CLI::App& app);

}  // namespace fitgrad::apps
