// A per-process scratch file for fuzz targets whose parsers read paths: each input is
// written to it, parsed, and removed. It lives in /dev/shm when there is one (a tmpfs runs a
// campaign ~30x faster than a disk), else in $TMPDIR or /tmp.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace fitgrad::fuzz {

class TempFile {
 public:
  // `name` tells the files of one process apart: "gguf" gives .../fitgrad_fuzz_<pid>_gguf.
  explicit TempFile(const std::string& name) {
    const char* tmp = std::getenv("TMPDIR");
    const std::string dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : tmp ? tmp : "/tmp";
    path_ = fmt::format("{}/fitgrad_fuzz_{}_{}", dir, getpid(), name);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() { std::remove(path_.c_str()); }

  const std::string& path() const { return path_; }
  // Replaces the file's contents with `size` bytes.
  const std::string& write(const uint8_t* data, size_t size) const {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
    return path_;
  }

 private:
  std::string path_;
};

}  // namespace fitgrad::fuzz
