// The device error records of a data-parallel job, read on every rank before any rank raises
// (issue 57).
//
// Note [Device errors over the ranks]
// A card's kernels skip an out-of-range id and record it (Note [Device error flags] in
// cuda/error_flags.h); the run checks the records at each logging step, after an evaluation
// and before a checkpoint, and a recorded id ends it before a checkpoint holds the update of
// the batch that skipped it. Under DDP that batch's gradients are averaged into every rank's
// update, but only the rank that skipped the id has a record: it alone would raise, while rank
// 0, with clean records, saved the checkpoint and then waited in the next collective until
// --ddp_timeout, with a misleading "timed out". So every rank reads its records, the ranks
// gather what each found (its error's first kMessageBytes bytes, over the group, on the run's
// device), and every rank that learns of one raises the same error, naming the ranks that
// recorded it, before any checkpoint is written. One all-gather of world x 512 bytes per check.
#pragma once

#include "dist/process_group.h"
#include "tensor/device.h"

namespace fitgrad::dist {

// check_device_errors(device) on every rank of `group` (this process alone when null); throws
// the same fitgrad::Error on every rank when any rank recorded an error. On meta the records
// are not read back (a plan makes the same allocations and collective).
void check_device_errors_over_ranks(ProcessGroup* group, Device device);

}  // namespace fitgrad::dist
