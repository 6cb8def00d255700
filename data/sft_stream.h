// Encoded instruction and chat examples (data/sft_encode.h) laid out as a token stream that
// the loader (data/loader.h) cuts into windows of seq_len tokens, one batch row each, with a
// trained flag per token (Note [Trained targets] in loader.cpp) and, for packed rows, each
// token's position within its example (Note [Packed rows] in tensor/backend/attention_mask.h).
// Three layouts (--packing):
//   - none: each example in a window of its own, cut to seq_len (as transformers truncates to
//     max_length) and padded;
//   - bfd: whole examples (cut to seq_len) in best-fit-decreasing bins of seq_len tokens, the
//     rest of a bin padding (Note [Best-fit-decreasing bins]);
//   - wrapped: the examples end to end, cut into windows wherever seq_len falls, each piece
//     an example of its own within its window.
// In every layout no target crosses from one example into the next: an example's first token
// is never a target, so the target of the position before it is ignored; padding is no
// target either.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "data/sft_encode.h"

namespace fitgrad::data {

enum class Packing { none, bfd, wrapped };
Packing parse_packing(std::string_view name);  // "none", "bfd" or "wrapped"
std::string_view packing_name(Packing packing);

struct SftStream {
  std::vector<int32_t> tokens;     // windows of seq_len tokens, then one padding token
  std::vector<uint8_t> trained;    // one flag per token: a target the loss learns
  std::vector<int32_t> positions;  // packed layouts: each token's position in its example
  std::vector<int32_t> lengths;    // none, pairs: each row's example length, padding not
                                   // counted
  int64_t examples = 0;            // examples laid out
  int64_t rows = 0;                // windows of the loader
  int64_t real_tokens = 0;         // tokens of the examples, padding not counted
  int64_t trained_tokens = 0;      // targets the loss learns
  int64_t truncated = 0;           // examples cut to seq_len (none, bfd)
  std::vector<size_t> dropped;     // the indices of the examples left without a target
  std::vector<uint8_t> labels;     // unpaired preference pairs (KTO): each example's label
};

// The targets an example keeps within its first `limit` tokens: its trained tokens but the
// first.
int64_t kept_targets(const SftTokens& example, int64_t limit);

// Lays out the examples, padded with `pad`, and ends the stream with the padding token that
// the last window's last target reads. An example left without a target (none trained, or
// all cut away) is left out and its index listed in `dropped`, for the caller to report.
SftStream layout_examples(const std::vector<SftTokens>& examples, int64_t seq_len, int32_t pad,
                          Packing packing);

// Preference pairs (--objective dpo, orpo): pair i's chosen answer in row 2i and its rejected
// one in row 2i + 1, each laid out as --packing none lays out an example (cut to seq_len,
// padded). A pair either of whose answers is left without a target is left out whole, its
// index listed in `dropped`; `examples` counts the pairs laid out.
SftStream layout_pairs(const std::vector<SftTokens>& chosen, const std::vector<SftTokens>& rejected,
                       int64_t seq_len, int32_t pad);

// Best-fit-decreasing bins of `capacity` for items of the given sizes (each <= capacity): the
// items' indices, bin by bin in the order the bins were opened, each bin's in the order placed.
std::vector<std::vector<size_t>> bfd_bins(const std::vector<int64_t>& sizes, int64_t capacity);

}  // namespace fitgrad::data
