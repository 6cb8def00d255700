// The output directory lock (Note [Output directory lock] in output_lock.h).
#include "train/output_lock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "tensor/error.h"

namespace fitgrad::train {

OutputDirLock::OutputDirLock(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / ".fitgrad.lock").string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  FG_CHECK(fd_ >= 0, "[train] --output_dir {}: cannot open the lock file {}: {}", dir, path,
           std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[32] = {};
    const ssize_t n = ::pread(fd_, buf, sizeof(buf) - 1, 0);
    ::close(fd_);
    fd_ = -1;
    const std::string holder = n > 0 ? std::string(buf, size_t(n)) : std::string("unknown");
    FG_CHECK(err != EWOULDBLOCK,
             "[train] --output_dir {} is in use by another fitgrad run (pid {}); "
             "wait for it to end, or choose another --output_dir",
             dir, holder.substr(0, holder.find('\n')));
    throw Error(
        fmt::format("[train] --output_dir {}: cannot lock {}: {}", dir, path, std::strerror(err)));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  const bool wrote =
      ::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, pid.data(), pid.size(), 0) == ssize_t(pid.size());
  (void)wrote;  // without the pid the lock still holds; a refused run then names no holder
}

OutputDirLock::~OutputDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

}  // namespace fitgrad::train
