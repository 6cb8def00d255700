// MappedFile: open + fstat + mmap(MAP_PRIVATE), unmapped by the last copy.
#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "tensor/error.h"

namespace fitgrad::io {

struct MappedFile::Mapping {
  void* base = nullptr;
  size_t size = 0;
  Mapping(void* b, size_t s) : base(b), size(s) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() { munmap(base, size); }
};

// Note [Dropping loaded pages]
// A mapped model file's pages stay resident once read: loading a 1.4 GB sharded folder into
// the model kept the whole file in the process's resident set beside the model it was
// copied into (bench/RESULTS.md, "Model folders"). A loader that has copied an entry drops its
// pages (TensorSource::release in nn/tensor_source.h), so the resident peak is the model plus
// about one tensor. The range is shrunk to whole pages inside it: a page shared with the next
// tensor stays.
void MappedFile::drop_pages(size_t offset, size_t length) const {
  if (!mapping_ || length == 0 || offset >= size_) return;
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(data_) + offset;
  const uintptr_t end = begin + std::min(length, size_ - offset);
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (first < last) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

MappedFile MappedFile::open(const std::string& path, const std::string& where, MapMode mode) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  FG_CHECK(fd >= 0, "{} cannot open: {}", where, std::strerror(errno));
  struct stat st {};
  const bool stat_ok = fstat(fd, &st) == 0;
  const int stat_errno = errno;
  if (!stat_ok || !S_ISREG(st.st_mode)) {
    ::close(fd);
    FG_CHECK(stat_ok, "{} cannot stat: {}", where, std::strerror(stat_errno));
    throw Error(fmt::format("{} is not a regular file", where));
  }
  MappedFile file;
  file.mode_ = mode;
  file.size_ = size_t(st.st_size);
  if (file.size_ == 0) {
    ::close(fd);
    return file;  // mmap refuses length 0; an empty view needs no mapping
  }
  const int prot = mode == MapMode::copy_on_write ? PROT_READ | PROT_WRITE : PROT_READ;
  void* base = mmap(nullptr, file.size_, prot, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);  // the mapping keeps the file's pages reachable on its own
  FG_CHECK(base != MAP_FAILED, "{} cannot mmap {} bytes: {}", where, file.size_,
           std::strerror(map_errno));
  file.mapping_ = std::make_shared<const Mapping>(base, file.size_);
  file.data_ = static_cast<char*>(base);
  return file;
}

char* MappedFile::writable_data() const {
  FG_CHECK(mode_ == MapMode::copy_on_write, "[io] a read-only mapping has no writable bytes");
  return data_;
}

}  // namespace fitgrad::io
