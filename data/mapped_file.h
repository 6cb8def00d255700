// A read-only memory mapping of a whole file, for the token cache (zero-copy token views)
// and for reading source text without a copy. The mapping is shared: copies of a
// MappedFile, and spans taken from it, stay valid as long as any copy lives.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace fitgrad::data {

class MappedFile {
 public:
  // Maps `path` read-only. `where` prefixes errors ("[data <path>]"); throws fitgrad::Error
  // when the file cannot be opened, is not a regular file, or cannot be mapped. A 0-byte
  // file maps to an empty view.
  static MappedFile open(const std::string& path, const std::string& where);

  std::string_view bytes() const { return {data_, size_}; }
  const char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  struct Mapping;
  std::shared_ptr<const Mapping> mapping_;
  const char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace fitgrad::data
