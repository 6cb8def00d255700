// Encoded instruction and chat examples (data/sft_encode.h) laid out as a token stream that
// the loader (data/loader.h) cuts into one example per window, with a trained flag per token
// (Note [Trained targets] in loader.cpp): each example in a slot of seq_len tokens, cut to
// seq_len (as transformers truncates to max_length) and padded, so that a batch row is one
// example, its padding and untrained tokens no targets, and no target crosses into the next
// example.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/sft_encode.h"

namespace fitgrad::data {

struct SftStream {
  std::vector<int32_t> tokens;   // slots of seq_len tokens, then one padding token
  std::vector<uint8_t> trained;  // one flag per token: a target the loss learns
  int64_t examples = 0;          // slots (windows of the loader)
  int64_t real_tokens = 0;       // tokens of the examples, padding not counted
  int64_t trained_tokens = 0;    // targets the loss learns
  int64_t truncated = 0;         // examples cut to seq_len
};

// Appends an example to `stream` in a slot of seq_len tokens, padded with `pad`. The example's
// first token is never a target (nothing precedes it); an example left with no target (none
// trained, or all cut away) is not appended and false returned, for the caller to report.
bool append_example(SftStream& stream, const SftTokens& example, int64_t seq_len, int32_t pad);
// Ends the stream with the padding token the last window's last target reads.
void finish_stream(SftStream& stream, int32_t pad);

}  // namespace fitgrad::data
