// Files that appear whole or not at all: a temporary file beside the target, written,
// fsync'ed, then renamed over the target. Checkpoints (safetensors), the token cache and the
// trainer's small JSON/SVG files all write through it.
//
// Note [Atomic file writes]
// rename(2) within one file system replaces the target atomically, and the fsync before it
// makes sure the renamed file's data reached the disk: after a crash, a kill or a full disk
// the target is the old file or the complete new one, never a torn mix. A temporary file
// that was never committed is removed by the destructor.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace fitgrad::io {

class AtomicFile {
 public:
  // Creates "<target>.tmp.<pid>.<n>"; `where` starts every error ("[safetensors x.st]") and
  // names the file as the user knows it: errors never name the temporary file.
  AtomicFile(std::string target, std::string where);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  void write(const void* data, size_t nbytes);
  // fsync and close, so that a commit() after it only renames (apps/output_policy.h syncs
  // all of a command's outputs before renaming any).
  void sync();
  // sync (unless done) and rename over the target.
  void commit();

 private:
  std::string target_;
  std::string where_;
  std::string path_;
  int fd_ = -1;
  bool synced_ = false;
  bool committed_ = false;
};

// Writes `text` to `path` through an AtomicFile.
void write_file_atomic(const std::string& path, std::string_view text, const std::string& where);

}  // namespace fitgrad::io
