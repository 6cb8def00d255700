// One run per output directory: an exclusive flock(2) on <output_dir>/.fitgrad.lock, held
// for the run's lifetime, with the holder's pid written in the file.
//
// Note [Output directory lock]
// Two runs into one --output_dir would interleave metrics.jsonl and take each other's
// checkpoints. The second run's lock fails at once (LOCK_NB) and it is refused with the
// holder's pid. The kernel drops a flock when its process dies, however it dies, so a lock
// file left by a killed run never blocks the next one: only a live holder does.
#pragma once
#include <string>

namespace fitgrad::train {

class OutputDirLock {
 public:
  // Locks `dir` (which must exist); throws fitgrad::Error naming the directory and the
  // holder's pid when another process holds it.
  explicit OutputDirLock(const std::string& dir);
  ~OutputDirLock();
  OutputDirLock(const OutputDirLock&) = delete;
  OutputDirLock& operator=(const OutputDirLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace fitgrad::train
