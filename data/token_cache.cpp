// Reading, validating and atomically writing the token cache file (data/token_cache.h).
#include "data/token_cache.h"

#include <cstring>

#include "io/atomic_file.h"
#include "io/content_hash.h"
#include "tensor/error.h"

namespace fitgrad::data {

// Note [Token cache layout]: the file is written and read with the host's byte order,
// which fitgrad requires to be little-endian (as io/safetensors.cpp does). Tokens are
// always int32, even for vocabularies that fit 16 bits: the mapped bytes are then the
// std::span<const int32_t> the loader reads, with no widening copy. The cost is twice the
// disk and page cache of u16 (4 bytes a token; a 1B-token corpus is 4 GB). The 64-byte
// alignment of the tokens keeps them aligned for any element type. The token hash in the
// header catches a cache file that was damaged after it was written (the rename makes a
// half-written one impossible); checking it reads the mapped tokens once per open, which
// costs about what hashing the sources already does.
static_assert(std::endian::native == std::endian::little, "the token cache assumes little-endian");

namespace {

constexpr char kMagic[8] = {'F', 'G', 'T', 'O', 'K', 'E', 'N', 'S'};
constexpr size_t kHeaderBytes = 64;
constexpr size_t kAlign = 64;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t token_bytes;
  uint64_t count;
  uint64_t fingerprint_bytes;
  uint64_t token_hash;
  uint64_t data_offset;
  uint8_t zero[16];
};
static_assert(sizeof(Header) == kHeaderBytes);

size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

}  // namespace

std::optional<MappedTokens> map_token_cache(const std::string& path, std::string_view fingerprint) {
  if (::access(path.c_str(), F_OK) != 0) return std::nullopt;
  MappedTokens out;
  try {
    out.file = io::MappedFile::open(path, "[data cache]");
  } catch (const Error&) {
    return std::nullopt;  // unreadable: rebuilt (and the rebuild reports a real I/O error)
  }
  const std::string_view bytes = out.file.bytes();
  if (bytes.size() < kHeaderBytes) return std::nullopt;
  Header h;
  std::memcpy(&h, bytes.data(), kHeaderBytes);
  if (std::memcmp(h.magic, kMagic, 8) != 0 || h.version != kTokenCacheVersion ||
      h.token_bytes != sizeof(int32_t) || h.fingerprint_bytes != fingerprint.size() ||
      h.data_offset != round_up(kHeaderBytes + fingerprint.size(), kAlign) ||
      h.data_offset > bytes.size() || h.count > (bytes.size() - h.data_offset) / sizeof(int32_t) ||
      bytes.size() != h.data_offset + h.count * sizeof(int32_t)) {
    return std::nullopt;
  }
  if (bytes.substr(kHeaderBytes, fingerprint.size()) != fingerprint) return std::nullopt;
  const std::string_view token_bytes = bytes.substr(h.data_offset);
  if (io::content_hash(token_bytes) != h.token_hash) return std::nullopt;
  out.tokens = {reinterpret_cast<const int32_t*>(token_bytes.data()), size_t(h.count)};
  return out;
}

void write_token_cache(const std::string& path, std::string_view fingerprint,
                       std::span<const int32_t> tokens, const std::string& where) {
  const std::string_view token_bytes(reinterpret_cast<const char*>(tokens.data()),
                                     tokens.size_bytes());
  Header h{};
  std::memcpy(h.magic, kMagic, 8);
  h.version = kTokenCacheVersion;
  h.token_bytes = sizeof(int32_t);
  h.count = tokens.size();
  h.fingerprint_bytes = fingerprint.size();
  h.token_hash = io::content_hash(token_bytes);
  h.data_offset = round_up(kHeaderBytes + fingerprint.size(), kAlign);
  const std::string padding(h.data_offset - kHeaderBytes - fingerprint.size(), '\0');

  io::AtomicFile file(path, where);
  file.write(&h, sizeof(h));
  file.write(fingerprint.data(), fingerprint.size());
  file.write(padding.data(), padding.size());
  file.write(token_bytes.data(), token_bytes.size());
  file.commit();
}

}  // namespace fitgrad::data
