// The process group of this process, from the environment a launcher sets: torchrun's
// variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), set
// by `fitgrad launch`, torchrun, or an mpirun/Slurm wrapper that exports them.
//
// Note [Rendezvous stores]
// The ranks meet through one of Gloo's stores, never one of ours. FITGRAD_STORE names it:
// `file:<dir>` (Gloo's FileStore: a directory every rank can reach, fresh for each job;
// `fitgrad launch` makes one) or `redis:<host>:<port>` (Gloo's RedisStore; Debian's Gloo
// is built with Redis: a Redis server the ranks reach). Unset, a job on one host (WORLD_SIZE
// == LOCAL_WORLD_SIZE) uses the FileStore in $TMPDIR/fitgrad-rendezvous-<MASTER_PORT>: rank 0
// removes it when the job ends (once every rank has met, for NCCL), so the next job on that
// port starts afresh, as torchrun's habit of reusing a port expects; a store that still holds
// the keys of a job that died is refused with the command that clears it (Note [Meeting in
// the store] in dist/store.h). A job across hosts uses the RedisStore at
// MASTER_ADDR:MASTER_PORT. Each rank's transport listens on 127.0.0.1 on one host and on its
// host name across hosts (FITGRAD_GLOO_HOSTNAME overrides). An NCCL group (cuda tensors)
// passes its unique id through the same store.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "dist/process_group.h"
#include "tensor/device.h"

namespace fitgrad::dist {

struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string store;       // Note [Rendezvous stores]
  bool own_store = false;  // the default FileStore, which the job removes at its end
  std::string hostname;    // where this rank's transport listens
};

// The launcher's variables, or nullopt when WORLD_SIZE is unset (a single process). Throws
// fitgrad::Error "[dist] ..." naming a variable that is missing or out of range.
std::optional<DistEnv> dist_env_from_environment();

// The group of this process over `device`'s backend: Gloo for cpu, NCCL for cuda (where
// built). Throws when the backend is missing or the rendezvous fails.
std::unique_ptr<ProcessGroup> make_process_group(const DistEnv& env, Device device,
                                                 std::chrono::milliseconds timeout);

}  // namespace fitgrad::dist
