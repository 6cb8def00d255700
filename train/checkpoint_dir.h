// Checkpoint directories of a training run: <output_dir>/checkpoint-<step>/, written
// atomically with a manifest, listed, verified, pruned to --save_total_limit, and found
// again for a resume.
//
// Note [Atomic checkpoints]
// A checkpoint is written into <output_dir>/tmp-checkpoint-<step>/, every file and then
// the directory are fsync'ed, and only then is it renamed to checkpoint-<step> (one
// rename(2), atomic within a file system). A crash, an OOM or a kill at any moment
// therefore leaves either the complete new checkpoint or none, and never touches the
// previous ones; a leftover tmp-checkpoint-* directory is ignored by the listing and
// replaced by the next save of that step. Older checkpoints are pruned only after the new
// one is in place, so the newest complete checkpoint always survives. Pruning renames a
// checkpoint to .pruned-checkpoint-<step> before deleting it, so a kill during the delete
// leaves a directory the listing does not see, never a half-deleted "checkpoint-<step>";
// the next pruning removes such leftovers.
//
// Note [Verified checkpoints]
// The last file written into a checkpoint is its manifest, fitgrad_checkpoint.json: the
// format, the step, and every other file with its size and 64-bit content hash
// (io/content_hash.h). A directory is a checkpoint only with a manifest that parses and
// names its step: a user's own "checkpoint-7" is neither listed, nor pruned, nor replaced.
// A resume verifies every file against the manifest first, and a mismatch is an error that
// names the file.
//
// Note [Verified reads]
// So does every other command that reads a directory holding a manifest: train's --model,
// generate's and eval's --model and --adapter, export's --base and --merge, quantize's IN. A
// damaged checkpoint is then an error naming the file, never a model with damaged weights. A
// folder without a manifest (Hugging Face's, PEFT's) is read as it is, and so is a damaged
// checkpoint with --skip_checkpoint_verification, which the error names. A plan or dry run on
// meta reads no weights and checks nothing.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace fitgrad::train {

inline constexpr const char* kCheckpointManifest = "fitgrad_checkpoint.json";

// Runs write(tmp_dir) to fill a fresh temporary directory, adds the manifest, then makes it
// <output_dir>/checkpoint-<step>, replacing a checkpoint of that step; a directory of that
// name that is not a checkpoint is an error naming it. Returns the final path.
std::string commit_checkpoint(const std::string& output_dir, int64_t step,
                              const std::function<void(const std::string& dir)>& write);

// The checkpoints in output_dir (directories with a manifest of their step) as (step,
// path), oldest first. Entries it cannot read (a symlink loop, no permission) are skipped.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& output_dir);

// Checks every file of the checkpoint in `dir` against its manifest; throws fitgrad::Error
// naming the first file that is missing, of the wrong size or of other content.
void verify_checkpoint(const std::string& dir);

// The flag that skips Note [Verified reads]'s check, and its help.
inline constexpr const char* kSkipVerificationFlag = "--skip_checkpoint_verification";
inline constexpr const char* kSkipVerificationHelp =
    "Read a checkpoint even when its files do not match its manifest (fitgrad_checkpoint.json)";

// Note [Verified reads]: verifies `path` when it is a directory with a manifest, unless
// `skip`; the error names `what` (the command and its option) and the flag that skips it.
void verify_before_reading(const std::string& path, const std::string& what, bool skip);

// Deletes all but the newest `keep` checkpoints (keep 0: deletes none). A checkpoint that
// cannot be deleted stays; the returned lines say which and why.
std::vector<std::string> prune_checkpoints(const std::string& output_dir, int64_t keep);

// --resume_from_checkpoint: a checkpoint directory, or "last" for the newest checkpoint in
// output_dir; verified (verify_before_reading) unless `skip_verification`. Throws
// fitgrad::Error naming what is wrong.
std::string resolve_resume_dir(const std::string& arg, const std::string& output_dir,
                               bool skip_verification = false);

}  // namespace fitgrad::train
