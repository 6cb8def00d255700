// Target profiles (Note [Meta plans for a target] in tensor/backend/profile.h): meta sizes
// its workspaces for the planning target, not for the machine it runs on. A dry run for a
// 16-thread CPU allocates 16 rows of flash-attention workspace and 16 norm partitions where
// one for 1 thread allocates 1, and everything else identically; the scope restores the
// previous target; bad profiles are refused.
#include "tensor/backend/profile.h"

#include <gtest/gtest.h>

#include <functional>

#include "tensor/memory/caching_allocator.h"
#include "tensor/ops/attention.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/norm.h"
#include "tensor/ops/svd.h"
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
        backend::MetaTargetScope s({DeviceType::meta, 1, false, 0});
      },
      "[profile]", "meta cannot plan for itself");
  expect_error([] { backend::cuda_profile(0, 0); }, "[profile]", "at least 1 multiprocessor");
  expect_error([] { backend::cuda_profile(8, 6); }, "[profile]", "multiple of 4 bytes");
  expect_error(
      [] { backend::flash_workspace_floats(backend::cuda_profile(8, 0), 64, true, DType::bf16); },
      "[profile]", "no size rule");
}

// Note [CUDA workspace rules]: what meta allocates for a card, op by op, from the rules'
// own arithmetic: every GEMM one cuBLASLt workspace and no staging (bf16 and f16 alike),
// flash attention's forward nothing beyond o and lse, its backward dq in f32 plus dk and
// dv in f32 for grouped heads, a norm backward min(rows, 2 SMs) partial rows, a long sum
// of squares one double per 4096-element block, and an svd_basis on the side of d rows its
// Gram matrix, d eigenvalues, two flags and LAPACK's 1 + 6 d + 2 d^2 floats of syevd work
// (Note [GaLore's SVD on a card]).
TEST(TargetProfile, ACudaTargetFollowsItsWorkspaceRules) {
  const int64_t workspace = int64_t(32) << 20;
  const backend::TargetProfile h100 = backend::cuda_profile(132, workspace);
  EXPECT_EQ(backend::profile_name(h100), "cuda (132 SMs, 32.00 MiB GEMM workspace)");
  const backend::MetaTargetScope scope(h100);
  const Device meta = Device::meta();
  CachingAllocator& alloc = allocator_for(meta);
  auto requested = [&](const std::function<void()>& f) {
    const uint64_t first = alloc.total_events();
    f();
    return testing::requested_since(first, meta);
  };
  for (DType dtype : {DType::bf16, DType::f16, DType::f32}) {
    const Tensor a = Tensor::empty({64, 128}, dtype, meta),
                 b = Tensor::empty({128, 256}, dtype, meta);
    EXPECT_EQ(requested([&] { ops::matmul(a, b); }),
              (std::vector<uint64_t>{64 * 256 * element_size(dtype), uint64_t(workspace)}))
        << dtype_name(dtype);
  }
  const int64_t B = 2, Hq = 8, Hkv = 2, T = 40, D = 64;
  const Tensor q = Tensor::empty({B, Hq, T, D}, DType::bf16, meta);
  const Tensor kv = Tensor::empty({B, Hkv, T, D}, DType::bf16, meta);
  ops::AttentionOut fwd;
  EXPECT_EQ(requested([&] { fwd = ops::flash_attention(q, kv, kv, true); }),
            (std::vector<uint64_t>{B * Hq * T * D * 2, B * Hq * T * 4}));
  EXPECT_EQ(requested([&] { ops::flash_attention_backward(q, q, kv, kv, fwd.o, fwd.lse, true); }),
            (std::vector<uint64_t>{B * Hq * T * D * 2, B * Hkv * T * D * 2, B * Hkv * T * D * 2,
                                   B * Hq * T * 4}));  // no f32 workspace: deterministic
  for (const auto& [m, n, left] :
       {std::tuple{6, 10, true}, std::tuple{10, 6, false}, std::tuple{10, 6, true}}) {
    const int64_t d = left ? m : n;
    const Tensor g = Tensor::empty({m, n}, DType::bf16, meta);
    const Tensor basis = Tensor::empty(left ? Shape{m, 2} : Shape{2, n}, DType::bf16, meta);
    EXPECT_EQ(requested([&, left = left] { ops::svd_basis_(g, basis, left); }),
              (std::vector<uint64_t>{uint64_t(4 * (d * d + d + 2 + 1 + 6 * d + 2 * d * d))}))
        << m << "x" << n << (left ? " left" : " right");
  }
  EXPECT_EQ(backend::norm_partitions(h100, 1000), 264);
  EXPECT_EQ(backend::norm_partitions(h100, 7), 7);
  EXPECT_EQ(backend::sum_squares_workspace_doubles(h100, 1'000'000), 245);  // ceil(1e6 / 4096)
  EXPECT_EQ(backend::sum_squares_workspace_doubles(h100, 4096), 1);         // one block: the result
  EXPECT_EQ(backend::sum_squares_workspace_doubles(h100, 100'000'000), 264);  // 2 per SM
}

}  // namespace
}  // namespace fitgrad::testing
