// The device of one rank of a data-parallel job: which card `--device cuda` means under a
// launcher (issue 57).
//
// Note [One card per rank]
// Under a launcher (dist/rendezvous.h), `--device cuda` means cuda:LOCAL_RANK, the card that
// torchrun's users give each rank (torch.device("cuda", local_rank)), so the ranks of one
// host take one card each. fitgrad picks the index rather than have `fitgrad launch` set
// CUDA_VISIBLE_DEVICES per rank: torchrun, mpirun and srun start ranks too, set LOCAL_RANK
// (or their own, which rendezvous.h reads) and leave every card visible. Two ranks of one
// host on one card are refused here, naming the fix, before NCCL's "invalid usage"
// (duplicate GPU) could end the job:
//   - `--device cuda` where this process sees fewer cards than the host has ranks: at most
//     that many ranks per host; or, where the launcher gives each rank its own card through
//     CUDA_VISIBLE_DEVICES (srun --gpus-per-task=1), --device cuda:0;
//   - `--device cuda:N` where every card is visible to every rank: all of the host's ranks
//     would take cuda:N; --device cuda gives each its own.
// Without a visible card the index is still LOCAL_RANK, and the first use says the card is
// missing. One process, and devices other than cuda, keep what --device says.
#pragma once

#include <optional>
#include <string_view>

#include "dist/rendezvous.h"
#include "tensor/device.h"

namespace fitgrad::dist {

// The device of this process from --device (`flag`), the launcher's environment (nullopt in
// one process) and the number of CUDA cards this process sees. Throws fitgrad::Error
// "[train] ..." for two local ranks on one card.
Device rank_device(std::string_view flag, const std::optional<DistEnv>& env, int visible_cards);

}  // namespace fitgrad::dist
