// The process group of this process, from the environment a launcher sets: torchrun's
// variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), set
// by `fitgrad launch`, torchrun, or a wrapper that exports them; else Open MPI's or Slurm's.
//
// Note [Launchers' variables]
// torchrun's variables come first: a process that has WORLD_SIZE takes its place from them
// alone. Without it, a process that Open MPI's mpirun started takes its rank, world size,
// local rank and local world size from OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK and
// _LOCAL_SIZE; one that Slurm's srun started, from SLURM_PROCID, SLURM_STEP_NUM_TASKS,
// SLURM_LOCALID, and its node's count in SLURM_STEP_TASKS_PER_NODE ("2(x3),1") at
// SLURM_NODEID. The step's variables, not the job's: the batch script itself has
// SLURM_PROCID 0 and SLURM_NTASKS N, and is not rank 0 of anything. MASTER_ADDR is still the
// user's to export (`mpirun -x MASTER_ADDR`); under srun it defaults to the first host of
// SLURM_STEP_NODELIST, and under either scheduler MASTER_PORT defaults to torchrun's 29500.
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
// host name across hosts; FITGRAD_GLOO_HOSTNAME names the address instead, or
// GLOO_SOCKET_IFNAME (PyTorch's variable) the interface whose IPv4 address it is. An NCCL group (cuda tensors)
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
  std::string launcher;    // whose variables these were: torchrun, Open MPI or Slurm
};

// The launcher's variables (Note [Launchers' variables]), or nullopt when none is set (a
// single process). Throws fitgrad::Error "[dist] ..." naming a variable that is missing or
// out of range.
std::optional<DistEnv> dist_env_from_environment();

// The group of this process over `device`'s backend: Gloo for cpu, NCCL for cuda (where
// built). Throws when the backend is missing or the rendezvous fails.
std::unique_ptr<ProcessGroup> make_process_group(const DistEnv& env, Device device,
                                                 std::chrono::milliseconds timeout);

}  // namespace fitgrad::dist
