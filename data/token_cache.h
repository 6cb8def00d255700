// The cache file of a TokenDataset (data/token_dataset.h): a tokenized corpus written once
// and memory-mapped on every later open, so the token stream is read with zero copies.
//
// Layout (little-endian; Note [Token cache layout] in token_cache.cpp):
//   0   char[8]  magic "FGTOKENS"
//   8   u32      format version (kTokenCacheVersion)
//   12  u32      bytes per token (4: int32 ids)
//   16  u64      token count
//   24  u64      fingerprint length in bytes
//   32  u64      content_hash of the token bytes
//   40  u64      offset of the first token (64 + fingerprint length, rounded up to 64)
//   48  16 bytes zero
//   64  the fingerprint: text that names the sources and the tokenizer
//   ... zero padding, then the tokens
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "io/mapped_file.h"

namespace fitgrad::data {

inline constexpr uint32_t kTokenCacheVersion = 1;

// The tokens of a cache file, viewed in its mapping.
struct MappedTokens {
  io::MappedFile file;
  std::span<const int32_t> tokens;
};

// The tokens of the cache at `path` when it is complete, intact and was built from
// `fingerprint`; nullopt when it is missing, stale (another fingerprint), truncated or
// corrupt, so the caller rebuilds it.
std::optional<MappedTokens> map_token_cache(const std::string& path, std::string_view fingerprint);

// Writes the cache atomically: a temporary file beside `path`, fsync, then rename over it.
// `where` prefixes errors.
void write_token_cache(const std::string& path, std::string_view fingerprint,
                       std::span<const int32_t> tokens, const std::string& where);

}  // namespace fitgrad::data
