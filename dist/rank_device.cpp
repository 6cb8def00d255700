// One card per rank (rank_device.h, Note [One card per rank]).
#include "dist/rank_device.h"

#include <fmt/format.h>

#include "tensor/error.h"

namespace fitgrad::dist {

Device rank_device(std::string_view flag, const std::optional<DistEnv>& env, int visible_cards) {
  const Device device = Device::parse(flag);
  if (!env || device.type != DeviceType::cuda) return device;
  const int ranks = env->local_world_size;
  if (flag == "cuda") {
    if (visible_cards == 0 || ranks <= visible_cards) return Device::cuda(env->local_rank);
    throw Error(fmt::format(
        "[train] --device cuda gives each rank of a host its own card (cuda:LOCAL_RANK), and "
        "this host runs {} ranks ({}'s local world size) while this process sees {} CUDA "
        "device(s): two ranks "
        "would share a card, which NCCL refuses. Start at most {} rank(s) per host "
        "(--nproc_per_node {}), or, where the launcher gives each rank its own card through "
        "CUDA_VISIBLE_DEVICES, pass --device cuda:0",
        ranks, env->launcher, visible_cards, visible_cards, visible_cards));
  }
  if (ranks > 1 && visible_cards >= ranks)
    throw Error(fmt::format(
        "[train] --device {} puts all {} ranks of this host on one card, which NCCL refuses "
        "(duplicate GPU): pass --device cuda, and each rank takes cuda:LOCAL_RANK",
        flag, ranks));
  return device;
}

}  // namespace fitgrad::dist
