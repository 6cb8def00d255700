// The process group of a plan: one rank of a data-parallel job planned on meta (`fitgrad
// memplan --world_size N --rank k`), whose other ranks do not exist.
//
// Note [Planning one rank]
// A rank's memory differs from one process's by what data parallelism adds and removes:
// DDP's bucket buffers (Category::collective) during the last backward, and under ZeRO the
// optimizer state of the parameters it does not own, and with stage 2 their gradients. The
// plan runs the real data-parallel code (dist/ddp.h, dist/zero.h) on meta over this group,
// so those allocations are the real run's, event for event. Each collective returns at once
// as if every other rank had held this rank's values: all_reduce and broadcast leave the
// tensor as it is (an average of equal values; a sum is only ever of flags no other rank
// raises in a plan), all_gather writes the shard into every rank's slot, reduce_scatter takes
// this rank's slice. Like Gloo's collectives, it allocates nothing from the caching
// allocator. Ownership under ZeRO is a function of the parameters and N alone, so rank k's
// plan holds what rank k of the real job holds.
#pragma once

#include <memory>

#include "dist/process_group.h"

namespace fitgrad::dist {

// Rank `rank` of `world` (1 <= world, 0 <= rank < world), for the plan of that rank.
std::unique_ptr<ProcessGroup> make_meta_group(int rank, int world);

}  // namespace fitgrad::dist
