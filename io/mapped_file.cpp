// MappedFile: open + fstat + mmap(MAP_PRIVATE), unmapped by the last copy.
#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
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
