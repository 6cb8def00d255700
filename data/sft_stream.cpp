// append_example and finish_stream (sft_stream.h).
#include "data/sft_stream.h"

#include <algorithm>

#include "tensor/error.h"

namespace fitgrad::data {

bool append_example(SftStream& stream, const SftTokens& example, int64_t seq_len, int32_t pad) {
  FG_CHECK(seq_len >= 2, "[data] a slot of {} tokens holds no target", seq_len);
  FG_CHECK(example.ids.size() == example.trained.size(), "[data] {} trained flags for {} tokens",
           example.trained.size(), example.ids.size());
  const size_t n = std::min(example.ids.size(), size_t(seq_len));
  int64_t targets = 0;
  for (size_t i = 1; i < n; ++i) targets += example.trained[i] ? 1 : 0;
  if (targets == 0) return false;
  const size_t at = stream.tokens.size();
  stream.tokens.resize(at + size_t(seq_len), pad);
  stream.trained.resize(at + size_t(seq_len), 0);
  std::copy(example.ids.begin(), example.ids.begin() + std::ptrdiff_t(n),
            stream.tokens.begin() + std::ptrdiff_t(at));
  std::copy(example.trained.begin() + 1, example.trained.begin() + std::ptrdiff_t(n),
            stream.trained.begin() + std::ptrdiff_t(at + 1));
  ++stream.examples;
  stream.real_tokens += int64_t(n);
  stream.trained_tokens += targets;
  if (example.ids.size() > n) ++stream.truncated;
  return true;
}

void finish_stream(SftStream& stream, int32_t pad) {
  stream.tokens.push_back(pad);
  stream.trained.push_back(0);
}

}  // namespace fitgrad::data
