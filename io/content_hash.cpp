// The 64-bit content hash (see content_hash.h): words mixed as in MurmurHash3's body, then
// its finalizer.
#include "io/content_hash.h"

#include <bit>
#include <cstring>

#include "io/mapped_file.h"

namespace fitgrad::io {
namespace {

constexpr uint64_t kK1 = 0x9E3779B97F4A7C15ull;  // 2^64 / golden ratio
constexpr uint64_t kK2 = 0xC2B2AE3D27D4EB4Full;

uint64_t mix_word(uint64_t h, uint64_t w) {
  w *= kK1;
  w = std::rotl(w, 31);
  w *= kK2;
  h ^= w;
  return std::rotl(h, 27) * 5 + 0x52DCE729ull;
}

// The 64-bit finalizer of MurmurHash3: every input bit affects every output bit.
uint64_t avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ull;
  h ^= h >> 33;
  return h;
}

}  // namespace

uint64_t content_hash(std::string_view bytes) {
  uint64_t h = kK2 ^ (uint64_t(bytes.size()) * kK1);
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, bytes.data() + i, 8);
    h = mix_word(h, w);
  }
  if (i < bytes.size()) {
    uint64_t w = 0;
    std::memcpy(&w, bytes.data() + i, bytes.size() - i);
    h = mix_word(h, w);
  }
  return avalanche(h);
}

uint64_t file_content_hash(const std::string& path, const std::string& where) {
  return content_hash(MappedFile::open(path, where).bytes());
}

}  // namespace fitgrad::io
