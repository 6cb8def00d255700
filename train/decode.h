// Text from a model after a prompt's tokens: sampling from a seed (nn/sampling.h) with a KV
// cache (nn/kv_cache.h), the text streamed as it comes. `fitgrad generate` and a training
// run's --eval_prompts (eval_prompts.h) both decode through it.
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
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "nn/sampling.h"
#include "tensor/device.h"
#include "tensor/dtype.h"
#include "train/model_source.h"

namespace fitgrad::train {

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

struct DecodeOptions {
  Device device = Device::cpu();
  DType dtype = DType::f32;  // of the KV cache
  uint64_t seed = 0;         // of the sampling draws
  // Tokens to generate; unset: 64, clamped to what the model's context leaves after the
  // prompt (GenerateStats::clamped_to says when it was).
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
GenerateStats generate_after(const LoadedModel& loaded, const DecodeOptions& options,
                             std::vector<int32_t> ids, std::ostream& out,
                             std::string* text = nullptr);

}  // namespace fitgrad::train
