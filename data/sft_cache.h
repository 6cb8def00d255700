// Encoded instruction examples in the token cache (data/token_cache.h): the ids and trained
// flags that data/sft_encode.h makes from a dataset's records, written once beside the data
// and read back by later runs, so a large dataset is rendered and tokenized once (Note
// [Encoded examples in the token cache] in sft_cache.cpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/sft_encode.h"

namespace fitgrad::data {

// The examples of the cache at `path` when it holds `fingerprint` and `count` examples, whole;
// nullopt when it is missing, stale, truncated or corrupt, so the caller encodes again.
std::optional<std::vector<SftTokens>> read_sft_cache(const std::string& path,
                                                     std::string_view fingerprint, size_t count);

// Writes the examples' cache atomically (write_token_cache); `where` prefixes errors.
void write_sft_cache(const std::string& path, std::string_view fingerprint,
                     const std::vector<SftTokens>& examples, const std::string& where);

}  // namespace fitgrad::data
