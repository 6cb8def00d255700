// A 64-bit hash of a byte string, for detecting changed sources, corrupt caches and
// corrupt checkpoint files (not cryptographic: it finds accidents, not attacks). Equal
// bytes give equal hashes on every machine; it reads about a gigabyte a second.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace fitgrad::io {

uint64_t content_hash(std::string_view bytes);
// The hash of a whole file's bytes, read through a mapping; `where` starts errors.
uint64_t file_content_hash(const std::string& path, const std::string& where);

}  // namespace fitgrad::io
