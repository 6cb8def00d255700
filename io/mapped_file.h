// A memory mapping of a whole file: the one mmap wrapper of the project. The token cache
// and the text sources map read-only; safetensors and GGUF map copy-on-write, so a tensor
// over the mapping may be written in place while the file never changes (Note
// [Copy-on-write mapping]). The mapping is shared: copies of a MappedFile, and views or
// Storages taken from it that hold a copy, stay valid as long as any copy lives.
//
// Note [Copy-on-write mapping]
// MAP_PRIVATE with PROT_WRITE gives each writer its own copy of the pages it writes, and the
// file on disk never changes. Under strict overcommit (vm.overcommit_memory=2) such a
// mapping is charged in full; the default heuristic mode charges only the pages written.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace fitgrad::io {

enum class MapMode { read_only, copy_on_write };

class MappedFile {
 public:
  // Maps `path`. `where` starts every error and names the file ("[gguf a.gguf]"); throws
  // fitgrad::Error when the file cannot be opened, is not a regular file, or cannot be
  // mapped. A 0-byte file maps to an empty view.
  static MappedFile open(const std::string& path, const std::string& where,
                         MapMode mode = MapMode::read_only);

  std::string_view bytes() const { return {data_, size_}; }
  const char* data() const { return data_; }
  // The mapped bytes for writing; only a copy_on_write mapping has them (else an error).
  char* writable_data() const;
  size_t size() const { return size_; }
  // Note [Dropping loaded pages]: gives the whole pages inside [offset, offset + length)
  // back to the kernel (madvise MADV_DONTNEED). A later read of them re-reads the file, and
  // a copy-on-write page written there loses what was written: only for bytes a caller has
  // copied out and will not write.
  void drop_pages(size_t offset, size_t length) const;

 private:
  struct Mapping;
  std::shared_ptr<const Mapping> mapping_;
  char* data_ = nullptr;
  size_t size_ = 0;
  MapMode mode_ = MapMode::read_only;
};

}  // namespace fitgrad::io
