// One card per rank (Note [One card per rank] in dist/rank_device.h), without a GPU: the
// choice is a function of --device, the launcher's variables and the cards this process
// sees. Under a launcher `--device cuda` is cuda:LOCAL_RANK (torchrun's users' habit), and
// two ranks of one host on one card are refused with the fix.
#include "dist/rank_device.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::dist {
namespace {

DistEnv host_of(int local_rank, int local_world_size) {
  DistEnv env;
  env.rank = local_rank;
  env.world_size = local_world_size;
  env.local_rank = local_rank;
  env.local_world_size = local_world_size;
  env.launcher = "torchrun";
  return env;
}

TEST(RankDevice, OneProcessKeepsWhatDeviceSays) {
  EXPECT_EQ(rank_device("cuda", std::nullopt, 4), Device::cuda(0));
  EXPECT_EQ(rank_device("cuda:2", std::nullopt, 4), Device::cuda(2));
  EXPECT_EQ(rank_device("cpu", std::nullopt, 0), Device::cpu());
}

TEST(RankDevice, UnderALauncherCudaIsTheLocalRanksCard) {
  for (int k = 0; k < 4; ++k) EXPECT_EQ(rank_device("cuda", host_of(k, 4), 4), Device::cuda(k));
  EXPECT_EQ(rank_device("cuda", host_of(1, 2), 8), Device::cuda(1));  // more cards than ranks
  // The CPU and one rank a host are untouched.
  EXPECT_EQ(rank_device("cpu", host_of(1, 2), 2), Device::cpu());
  EXPECT_EQ(rank_device("cuda:3", host_of(0, 1), 4), Device::cuda(3));
  // Without a visible card the index is still the local rank (its first use says why).
  EXPECT_EQ(rank_device("cuda", host_of(1, 2), 0), Device::cuda(1));
}

TEST(RankDevice, TwoLocalRanksOnOneCardAreRefusedWithTheFix) {
  // Fewer cards than ranks: one card per rank cannot be.
  testing::expect_error([] { rank_device("cuda", host_of(1, 2), 1); },
                        "[train] --device cuda gives each rank of a host its own card",
                        "this host runs 2 ranks (torchrun's local world size) while this process "
                        "sees 1 CUDA device(s): two ranks would share a card, which NCCL refuses. "
                        "Start at most 1 rank(s) per host (--nproc_per_node 1), or, where the "
                        "launcher gives each rank its own card through CUDA_VISIBLE_DEVICES, pass "
                        "--device cuda:0");
  testing::expect_error([] { rank_device("cuda", host_of(0, 4), 2); },
                        "[train] --device cuda gives", "(--nproc_per_node 2)");
  // Every card visible and one index for all: the ranks would share it.
  testing::expect_error([] { rank_device("cuda:0", host_of(1, 2), 2); },
                        "[train] --device cuda:0 puts all 2 ranks of this host on one card",
                        "pass --device cuda, and each rank takes cuda:LOCAL_RANK");
}

TEST(RankDevice, ALauncherThatNarrowsEachRankToOneCardKeepsAnExplicitIndex) {
  // srun --gpus-per-task=1: each rank sees one card, its own.
  EXPECT_EQ(rank_device("cuda:0", host_of(1, 4), 1), Device::cuda(0));
}

}  // namespace
}  // namespace fitgrad::dist
