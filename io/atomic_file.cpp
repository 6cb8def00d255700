// Temporary file, fsync, rename (atomic_file.h, Note [Atomic file writes]).
#include "io/atomic_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "tensor/error.h"

namespace fitgrad::io {
namespace {
std::string errno_text() { return std::strerror(errno); }
std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}
}  // namespace

AtomicFile::AtomicFile(std::string target, std::string where)
    : target_(std::move(target)), where_(std::move(where)) {
  static std::atomic<uint64_t> counter{0};
  do {
    path_ = fmt::format("{}.tmp.{}.{}", target_, getpid(), counter++);
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  } while (fd_ < 0 && errno == EEXIST);
  // Errors name `where` (the user's path), never the temporary file.
  FG_CHECK(fd_ >= 0, "{} cannot create a file in {}: {}", where_, directory_of(target_),
           errno_text());
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(path_.c_str());
}

void AtomicFile::write(const void* data, size_t nbytes) {
  const auto* p = static_cast<const char*>(data);
  while (nbytes > 0) {
    const ssize_t n = ::write(fd_, p, nbytes);
    if (n < 0 && errno == EINTR) continue;
    FG_CHECK(n > 0, "{} cannot write: {}", where_, errno_text());
    p += n;
    nbytes -= size_t(n);
  }
}

void AtomicFile::sync() {
  if (synced_) return;
  FG_CHECK(::fsync(fd_) == 0, "{} cannot sync to disk: {}", where_, errno_text());
  const int rc = ::close(fd_);
  fd_ = -1;
  FG_CHECK(rc == 0, "{} cannot close: {}", where_, errno_text());
  synced_ = true;
}

void AtomicFile::commit() {
  sync();
  FG_CHECK(::rename(path_.c_str(), target_.c_str()) == 0, "{} cannot put the new file in place: {}",
           where_, errno_text());
  committed_ = true;
}

void write_file_atomic(const std::string& path, std::string_view text, const std::string& where) {
  AtomicFile file(path, where);
  file.write(text.data(), text.size());
  file.commit();
}

}  // namespace fitgrad::io
