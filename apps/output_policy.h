// One output policy for every command that writes a file (`memviz`, `export`, `quantize`
// and `memplan`'s memory record; `train` owns its --output_dir, Note [Whose checkpoints]):
// the command names its inputs and its outputs, each output is checked against the rules
// of Note [Output policy] before anything is read or computed, each is then written to a
// temporary file beside its real target, and commit() renames them all into place at the
// end. docs/run_promises.md states the rules for users.
//
// Note [Output policy]
// An output path is refused, by an error that names the command, the flag and the path as
// the user typed it, when
//   - it is the same file (device and inode, whatever the spelling: ./t.json, a symlink, a
//     hard link) as one of the command's inputs, or as another of its outputs;
//   - it lies in a training run's directory or in a checkpoint, at any depth
//     (Note [Run directories]): only `train` writes a run's record;
//   - it is not a regular file (a directory, a device, a FIFO, a socket), or it is or leads
//     through /dev, /proc or /sys (/dev/stdout resolves to whatever standard output is);
//     "-" means standard output where the command's format allows it;
//   - it exists and --overwrite was not given (the error says to pass it);
//   - it exists and is write-protected (no write permission bit, or not writable by this
//     user): such a file is never replaced, not even with --overwrite (as root, rename(2)
//     would replace a 0444 file or another user's file without a question);
//   - it exists with more than one hard link. Note [Hard-linked outputs] says why.
// An output that is a symbolic link is written to the file the link resolves to (the
// temporary file beside that file, then rename), so the link stays a link. The directory
// of an output must exist, except a directory the command creates itself (memplan's
// --output_dir).
//
// Note [Hard-linked outputs]
// An atomic replacement makes a new file (a new inode), so the other names of a hard-linked
// file would silently keep the old contents; writing in place instead would keep the link
// but leave a torn file after a crash or a full disk. Neither is what the user asked for,
// so a file with st_nlink > 1 is refused, even with --overwrite, and the error says why:
// remove that name first (the other links keep the old data) or write elsewhere.
//
// Note [All outputs or none]
// Outputs are staged (file() or text()) in temporary files that are renamed only by
// commit(), after everything was computed; a command that throws before commit() leaves
// none of its outputs behind (the temporaries are removed, a directory it created is
// removed when still empty). The renames come one after the other: only a failure of
// rename(2) itself between two of them (the file system went away) can leave the first
// output replaced and the second not, and that is reported.
//
// Note [Run directories]
// A directory is a training run's or a checkpoint when it holds any of what `fitgrad train`
// (or Hugging Face's Trainer) leaves there: .fitgrad.lock (every run, dry runs included),
// metrics.jsonl, loss_curve.svg, trainer_state.json, training_args.bin, a checkpoint
// manifest (fitgrad_checkpoint.json), optimizer.safetensors or optimizer.pt, or a
// checkpoint-<step>, tmp-checkpoint-<step>, .pruned-checkpoint-<step> or overwritten-*
// directory. memory.json and the other memory-record files alone do not make one: memplan's
// own record is made of them (it never holds a lock file), and memplan may replace it.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "io/atomic_file.h"

namespace fitgrad::apps {

// What in `dir` shows that it is a training run's directory or a checkpoint (Note [Run
// directories]): the entry's name ("trainer_state.json", "checkpoint-4"), or "" when
// nothing does (also when `dir` cannot be read).
std::string run_directory_evidence(const std::filesystem::path& dir);

class OutputPolicy {
 public:
  // `command` starts every error ("[export]"); `overwrite` is the command's --overwrite.
  OutputPolicy(std::string command, bool overwrite);
  ~OutputPolicy();
  OutputPolicy(const OutputPolicy&) = delete;
  OutputPolicy& operator=(const OutputPolicy&) = delete;

  // A file or directory the command reads, named by `flag` ("TRACE", "--base"); one that
  // does not exist is left to the command's own reader to report.
  void input(const std::string& flag, const std::string& path);
  // A directory the command creates when missing and writes outputs into (memplan's
  // --output_dir): checked like an output's directory; outputs inside it may be declared
  // before it exists. Created by the first file() inside it.
  void directory(const std::string& flag, const std::string& path);
  // Checks the output `path` given with `flag` (Note [Output policy]); returns its index.
  // `stdout_ok`: "-" writes to standard output at commit().
  size_t output(const std::string& flag, const std::string& path, bool stdout_ok = false);

  // An existing file that the outputs make stale (an earlier export's shards and index beside
  // a new one): checked as an output, so removed only with --overwrite and never when
  // write-protected or hard-linked, and removed by commit() after the renames (Note [All
  // outputs or none]). Returns its index; nothing is written to it.
  size_t stale(const std::string& flag, const std::string& path);

  bool to_stdout(size_t i) const;
  // "[command] flag path:", how errors about output i start.
  std::string where(size_t i) const;
  // The temporary file of output i (not standard output), created on first use.
  io::AtomicFile& file(size_t i);
  // Appends `text` to output i (a file or standard output).
  void text(size_t i, std::string_view text);
  // Renames every staged output over its target, in the order they were declared, removes the
  // stale ones, and writes the standard-output ones to `out` (Note [All outputs or none]).
  void commit(std::ostream& out);

 private:
  struct Output;
  struct Input {
    std::string flag, path;
    dev_t dev;
    ino_t ino;
  };
  struct Directory {
    std::string flag, path;
    std::filesystem::path real;
    std::vector<std::filesystem::path> made;  // the levels file() created, outermost first
  };
  // Throws unless `dir` and every directory above it are neither a run nor a checkpoint;
  // `is_the_directory`: `who` names `dir` itself rather than something inside it.
  void check_outside_runs(const std::string& who, const std::filesystem::path& dir,
                          bool is_the_directory) const;
  const Directory* created_directory(const std::filesystem::path& dir) const;

  std::string command_;
  bool overwrite_;
  bool committed_ = false;
  std::vector<Input> inputs_;
  std::vector<Directory> directories_;
  std::vector<std::unique_ptr<Output>> outputs_;
};

}  // namespace fitgrad::apps
