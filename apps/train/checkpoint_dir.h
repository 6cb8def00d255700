// Checkpoint directories of a training run: <output_dir>/checkpoint-<step>/, written
// atomically, listed, pruned to --save_total_limit, and found again for a resume.
//
// Note [Atomic checkpoints]
// A checkpoint is written into <output_dir>/tmp-checkpoint-<step>/, every file and then
// the directory are fsync'ed, and only then is it renamed to checkpoint-<step> (one
// rename(2), atomic within a file system). A crash, an OOM or a kill at any moment
// therefore leaves either the complete new checkpoint or none, and never touches the
// previous ones; a leftover tmp-checkpoint-* directory is ignored by the listing and
// replaced by the next save of that step. Older checkpoints are pruned only after the new
// one is in place, so the newest complete checkpoint always survives.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace fitgrad::apps {

// Runs write(tmp_dir) to fill a fresh temporary directory, then makes it
// <output_dir>/checkpoint-<step> (replacing one of that name). Returns the final path.
std::string commit_checkpoint(const std::string& output_dir, int64_t step,
                              const std::function<void(const std::string& dir)>& write);

// The complete checkpoints in output_dir as (step, path), oldest first.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& output_dir);

// Deletes all but the newest `keep` checkpoints (keep 0: deletes none).
void prune_checkpoints(const std::string& output_dir, int64_t keep);

// --resume_from_checkpoint: a directory holding trainer_state.json, or "last" for the
// newest checkpoint in output_dir. Throws fitgrad::Error naming what is missing.
std::string resolve_resume_dir(const std::string& arg, const std::string& output_dir);

}  // namespace fitgrad::apps
