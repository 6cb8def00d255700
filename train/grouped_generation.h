// Grouped generation for GRPO: G completions of each prompt, sampled with the KV-cache decoder
// (nn/kv_cache.h, Note [Cached decoding]) in batches of rows, each row stopping at the model's
// stop tokens or at max_completion_length. No gradient is recorded and the model is in eval
// mode while it runs (its mode is restored after); each batch's KV cache is freed when the
// batch ends, so the training pass that follows starts with none.
//
// Note [Grouped generation]
//   - Rows: completion c = p G + g is the g-th of prompt p; the result lists them in that
//     order. A batch is up to generation_batch_size consecutive rows whose prompts have the
//     same number of tokens (the cache's rows share one length, so rows of prompts of other
//     lengths are not padded into one batch): G rows of one prompt by default, several
//     prompts' groups at once when they are as long and the batch size allows. (TRL without
//     vLLM decodes its whole generation batch, generation_batch_size completions, in one
//     left-padded generate call; here the caller passes the prompts of a generation round and
//     generation_batch_size bounds the rows, so the cache, decoded at once.)
//   - A batch's cache holds prompt + max_completion_length - 1 positions (the last token is
//     never fed), allocated once when the batch starts and freed when it ends. Its prefill is
//     the batch's prompts, (B, P); then one (B, 1) step per token. A row that has stopped is
//     fed its stop token and its further draws ignored; the batch ends when every row has
//     stopped or reached max_completion_length.
//   - Draws (DESIGN.md, Numerics): the call reserves num_prompts G max_completion_length
//     draws from the caller's generator, at whatever point the rows stop, and token t of
//     completion c uses draw offset + c max_completion_length + t of that reservation (none
//     when greedy). A completion's tokens therefore do not depend on how rows are batched, and
//     a run resumed from a checkpoint that saved the generator's state redraws the same
//     completions.
//   - On meta (a dry run, which has no logits to sample) nothing is drawn from the logits:
//     every row runs to max_completion_length, fed token 0, so the plan is the longest
//     generation the options allow (its peak is the largest: the attention of the last step
//     reads the most positions) and every completion comes back truncated, of
//     max_completion_length zeros, without text. full_length makes a real run decode the same
//     steps (rows past their stop are still fed), so its allocations equal the dry run's
//     event for event.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "nn/decoder.h"
#include "nn/sampling.h"
#include "tensor/dtype.h"
#include "tensor/random/generator.h"
#include "train/model_source.h"

namespace fitgrad::train {

struct GroupGenerationOptions {
  int64_t num_generations = 8;          // G, completions per prompt (>= 1)
  int64_t max_completion_length = 256;  // tokens per completion, the stop token included
  int64_t generation_batch_size = 0;    // rows decoded at once; 0: G
  nn::SamplingOptions sampling;
  std::vector<int32_t> stop_ids;   // generation_stop_ids(); empty: rows stop only at the length
  DType cache_dtype = DType::f32;  // of the KV cache (the model's activation dtype)
  bool full_length = false;        // Note [Grouped generation]: decode as meta plans
};

struct Completion {
  int64_t prompt = 0;        // the index of its prompt
  std::vector<int32_t> ids;  // the generated tokens, without the stop token
  bool truncated = false;    // it reached max_completion_length without a stop token
  // The stop token that ended it (-1: none, a truncated completion): TRL trains it with the
  // completion (its completion mask covers the first eos), so GRPO's rows append it.
  int32_t stop = -1;
  // ids decoded alone, as TRL's batch_decode of the completion ids ("" on meta or without a
  // tokenizer); a special token other than the stop token is written as its text, an id past
  // the tokenizer's vocabulary as nothing.
  std::string text;
};

// The ids a model's generation stops at: its spec's (Note [Stop tokens] in model_source.cpp),
// else its tokenizer's eos, else none.
std::vector<int32_t> generation_stop_ids(const LoadedModel& loaded);

// G completions of each prompt (token ids, each non-empty), num_prompts G in all, in the
// order of Note [Grouped generation]; the model's device is the cache's. `tokenizer` decodes
// the text (may be null). Throws "[generate] ..." when a prompt with max_completion_length
// does not fit the model's context, or for options out of range.
std::vector<Completion> generate_groups(nn::CausalLM& model, const data::Tokenizer* tokenizer,
                                        const std::vector<std::vector<int32_t>>& prompts,
                                        const GroupGenerationOptions& options,
                                        Generator& generator);

}  // namespace fitgrad::train
