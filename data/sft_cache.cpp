// read_sft_cache and write_sft_cache (sft_cache.h).
//
// Note [Encoded examples in the token cache]
// The encodings go into a token cache file (data/token_cache.h: magic, fingerprint, content
// hash, atomic writes) as one int32 stream: the number of examples n, the n lengths, then every
// example's tokens in order, each an id (< 2^31) with its trained flag in bit 31. The
// fingerprint names everything the encodings depend on: the record files' sizes and content
// hashes, the tokenizer, the chat template's text, --train_on, whether a bos leads, and the
// reading options (train/train_sft.cpp). Any change there misses the cache, and the
// examples are encoded again and the cache rewritten; the cache's own hash catches a damaged
// file. The records themselves are still read on a hit: their formats and names are reported.
#include "data/sft_cache.h"

#include "data/token_cache.h"
#include "tensor/error.h"

namespace fitgrad::data {
namespace {

constexpr uint32_t kTrainedBit = uint32_t(1) << 31;

}  // namespace

std::optional<std::vector<SftTokens>> read_sft_cache(const std::string& path,
                                                     std::string_view fingerprint, size_t count) {
  const std::optional<MappedTokens> cached = map_token_cache(path, fingerprint);
  if (!cached) return std::nullopt;
  const std::span<const int32_t> s = cached->tokens;
  if (s.empty() || s[0] < 0 || size_t(s[0]) != count || s.size() < 1 + count) return std::nullopt;
  std::vector<SftTokens> examples(count);
  size_t at = 1 + count;
  for (size_t i = 0; i < count; ++i) {
    const int32_t n = s[1 + i];
    if (n < 0 || s.size() - at < size_t(n)) return std::nullopt;
    SftTokens& e = examples[i];
    for (size_t k = at; k < at + size_t(n); ++k) {
      const auto bits = uint32_t(s[k]);
      e.ids.push_back(int32_t(bits & ~kTrainedBit));
      e.trained.push_back((bits & kTrainedBit) != 0 ? 1 : 0);
      e.num_trained += e.trained.back();
    }
    at += size_t(n);
  }
  if (at != s.size()) return std::nullopt;
  return examples;
}

void write_sft_cache(const std::string& path, std::string_view fingerprint,
                     const std::vector<SftTokens>& examples, const std::string& where) {
  std::vector<int32_t> stream{int32_t(examples.size())};
  for (const SftTokens& e : examples) stream.push_back(int32_t(e.ids.size()));
  for (const SftTokens& e : examples)
    for (size_t k = 0; k < e.ids.size(); ++k) {
      FG_CHECK(e.ids[k] >= 0, "{} token id {} cannot be cached", where, e.ids[k]);
      stream.push_back(int32_t(uint32_t(e.ids[k]) | (e.trained[k] ? kTrainedBit : 0)));
    }
  write_token_cache(path, fingerprint, stream, where);
}

}  // namespace fitgrad::data
