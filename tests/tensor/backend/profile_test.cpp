// Target profiles (Note [Meta plans for a target] in tensor/backend/profile.h): meta sizes
// its workspaces for the planning target, not for the machine it runs on. A dry run for a
// 16-thread CPU allocates 16 rows of flash-attention workspace and 16 norm partitions where
// one for 1 thread allocates 1, and everything else identically; the scope restores the
// previous target; bad profiles are refused.
#include "tensor/backend/profile.h"

#include <gtest/gtest.h>

#include "tensor/memory/caching_allocator.h"
#include "tensor/ops/attention.h"
#include "tensor/ops/norm.h"
#include "tests/tensor/memory/events_since.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::testing {
namespace {

// The requested bytes of every allocation meta makes for one flash-attention forward and
// one layer-norm backward, planned for `target`.
std::vector<uint64_t> plan(const backend::TargetProfile& target) {
  const backend::MetaTargetScope scope(target);
  const Device meta = Device::meta();
  const Tensor q = Tensor::empty({1, 2, 40, 16}, DType::f32, meta);
  const Tensor x = Tensor::empty({40, 8}, DType::f32, meta),
               w = Tensor::empty({8}, DType::f32, meta);
  CachingAllocator& alloc = allocator_for(meta);
  const uint64_t first = alloc.total_events();
  ops::flash_attention(q, q, q, true);
  const ops::LayerNormOut o = ops::layer_norm(x, w, Tensor(), 1e-5);
  ops::layer_norm_backward(x, x, w, o.mean, o.rstd, false);
  return testing::requested_since(first, meta);
}

TEST(TargetProfile, MetaSizesWorkspacesForThePlanningTarget) {
  const std::vector<uint64_t> one = plan(backend::cpu_profile(1, false));
  const std::vector<uint64_t> sixteen = plan(backend::cpu_profile(16, false));
  ASSERT_EQ(one.size(), sixteen.size());
  const backend::TargetProfile p1 = backend::cpu_profile(1, false);
  const uint64_t flash_row =
      uint64_t(backend::flash_workspace_floats(p1, 16, false, DType::f32)) * 4;
  int differing = 0;
  for (size_t i = 0; i < one.size(); ++i) {
    if (one[i] == sixteen[i]) continue;
    ++differing;
    // A per-thread workspace: flash's (threads, W) rows, or the norm's (P, 2 C) partials.
    const bool flash = one[i] == flash_row && sixteen[i] == 16 * flash_row;
    const bool partials = one[i] == 1 * 2 * 8 * 4 && sixteen[i] == 16 * 2 * 8 * 4;
    EXPECT_TRUE(flash || partials) << "allocation " << i << ": " << one[i] << " vs " << sixteen[i];
  }
  EXPECT_EQ(differing, 2);
  EXPECT_EQ(backend::norm_partitions(backend::cpu_profile(16, false), 5), 5);  // at most a row each
}

TEST(TargetProfile, ScopesNestAndRestore) {
  const backend::TargetProfile before = backend::profile_for(Device::meta());
  {
    const backend::MetaTargetScope outer(backend::cpu_profile(8, false));
    {
      const backend::MetaTargetScope inner(backend::cpu_profile(3, true));
      EXPECT_EQ(backend::profile_for(Device::meta()), backend::cpu_profile(3, true));
    }
    EXPECT_EQ(backend::profile_for(Device::meta()), backend::cpu_profile(8, false));
    EXPECT_EQ(backend::profile_for(Device::cpu()), backend::host_cpu_profile());  // cpu is the host
  }
  EXPECT_EQ(backend::profile_for(Device::meta()), before);
  EXPECT_EQ(backend::profile_name(backend::cpu_profile(2, true)), "cpu (2 threads, bf16 GEMM)");
}

TEST(TargetProfile, BadProfilesAreRefused) {
  expect_error([] { backend::cpu_profile(0, false); }, "[profile]", "at least 1 thread");
  expect_error(
      [] {
        backend::MetaTargetScope s({DeviceType::meta, 1, false});
      },
      "[profile]", "meta cannot plan for itself");
  expect_error(
      [] {
        backend::attention_threads({DeviceType::cuda, 1, false});
      },
      "[profile]", "no size rule");
}

}  // namespace
}  // namespace fitgrad::testing
