// The NCCL backend of dist::ProcessGroup (process_group.h): collectives on cuda tensors.
// nccl_group.cpp is built with the CUDA backend where the toolkit's NCCL is found;
// otherwise nccl_missing.cpp says so when a group is asked for.
//
// Note [NCCL group]
// Rank 0 makes the NCCL unique id and passes it to the others through the job's Gloo store
// (Note [Rendezvous stores] in dist/rendezvous.h), as llm.c passes it through a shared file;
// each rank then joins the communicator on the device of its LOCAL_RANK. Collectives run on
// the group's own stream, ordered after the work queued so far on the device, and a Work
// waits for an event behind them, polling the communicator's asynchronous error; past the
// timeout the communicator is aborted and the collective throws (NCCL does not say which
// peer failed). Sharded collectives stage through a padded buffer (Category::collective)
// since NCCL's reduce-scatter and all-gather take equal shards.
#pragma once

#include <chrono>
#include <memory>

#include "dist/process_group.h"
#include "dist/rendezvous.h"

namespace fitgrad::dist {

// Throws fitgrad::Error when this build has no NCCL.
std::unique_ptr<ProcessGroup> make_nccl_group(const DistEnv& env, Device device,
                                              std::chrono::milliseconds timeout);

}  // namespace fitgrad::dist
