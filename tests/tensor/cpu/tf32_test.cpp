// TF32 emulation (Note [TF32 on the CPU] in tensor/cpu/gemm.h): the rounding against values
// worked out by hand from the format (10 explicit mantissa bits, ties to even); linear and
// matmul in TF32 mode against an fp64 product of the rounded operands, with several blocks
// of the staged GEMM and the allocations the ledger sees; gemm_f32 itself stays fp32.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "tensor/backend/math_mode.h"
#include "tensor/cpu/gemm.h"
#include "tensor/cpu/gemm_staged.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/ops/matmul.h"
#include "tests/tensor/memory/events_since.h"

namespace fitgrad::cpu {
namespace {

using Tf32Mode = backend::MatmulTf32Scope;
using backend::matmul_tf32;

TEST(Tf32, RoundsToTenMantissaBitsTiesToEven) {
  const float ulp = std::ldexp(1.0f, -10);  // TF32's spacing in [1, 2)
  struct Row {
    float in, out;
  };
  for (const Row& r : std::vector<Row>{
           {1.0f, 1.0f},
           {1.0f + ulp, 1.0f + ulp},                              // representable
           {1.0f + ulp / 2, 1.0f},                                // tie: to even (1.0)
           {1.0f + 3 * ulp / 2, 1.0f + 2 * ulp},                  // tie: to even (1 + 2 ulp)
           {1.0f + ulp / 2 + std::ldexp(1.0f, -23), 1.0f + ulp},  // just above the tie
           {-(1.0f + 0.75f * ulp), -(1.0f + ulp)},                // sign kept
           {0.1f, 0.0999755859375f},                              // 0x3dccc000
           {std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity()},
           {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity()},
           {0.0f, 0.0f},
       })
    EXPECT_EQ(round_to_tf32(r.in), r.out) << r.in;
  EXPECT_TRUE(std::isnan(round_to_tf32(std::numeric_limits<float>::quiet_NaN())));
}

// The largest |got - fp64 product of the TF32-rounded operands| over C, and the largest
// |got - exact|: A (m, k), B stored (n, k).
struct Errors {
  double to_rounded = 0, to_exact = 0;
};
Errors errors(const std::vector<float>& a, const std::vector<float>& b, int64_t m, int64_t n,
              int64_t k, const std::vector<float>& got, const std::vector<float>& exact) {
  Errors e;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0;
      for (int64_t p = 0; p < k; ++p)
        ref += double(round_to_tf32(a[size_t(i * k + p)])) *
               double(round_to_tf32(b[size_t(j * k + p)]));
      const size_t at = size_t(i * n + j);
      e.to_rounded = std::max(e.to_rounded, std::abs(got[at] - ref));
      e.to_exact = std::max(e.to_exact, double(std::abs(got[at] - exact[at])));
    }
  return e;
}

TEST(Tf32, LinearAndMatmulMatchAnFp64ProductOfRoundedOperands) {
  // Two blocks in m (256) and two k panels (512), each with a ragged remainder.
  const int64_t m = 300, n = 17, k = 600;
  std::mt19937 rng(5);
  std::normal_distribution<float> dist;
  std::vector<float> a(size_t(m * k)), b(size_t(n * k));
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);
  const Tensor ta = Tensor::from_vector(a, {m, k}), tb = Tensor::from_vector(b, {n, k});
  const std::vector<float> exact = ops::linear(ta, tb, Tensor()).to_vector<float>();
  std::vector<float> direct_off(size_t(m * n)), direct_on(size_t(m * n));
  gemm_f32(false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, direct_off.data(), n);
  CachingAllocator& alloc = allocator_for(Device::cpu());
  std::vector<float> lin, mm;
  std::vector<uint64_t> allocs;
  {
    Tf32Mode on(true);
    const uint64_t first = alloc.total_events();
    lin = ops::linear(ta, tb, Tensor()).to_vector<float>();
    allocs = testing::requested_since(first);
    mm = ops::matmul(ta, tb, false, true).to_vector<float>();
    gemm_f32(false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, direct_on.data(), n);
  }
  EXPECT_EQ(direct_on, direct_off) << "gemm_f32 is plain fp32 whatever the mode";
  for (const std::vector<float>* got : {&lin, &mm}) {
    const Errors e = errors(a, b, m, n, k, *got, exact);
    EXPECT_LT(e.to_rounded, 2e-4);  // fp32 accumulation of 600 terms of size ~1
    EXPECT_GT(e.to_exact, 1e-3);    // and the rounding really happened: TF32 is far coarser
  }
  // The (m, n) result and the staged GEMM's workspace, nothing else (no rounded copies).
  EXPECT_EQ(allocs, (std::vector<uint64_t>{uint64_t(m * n * 4),
                                           uint64_t(gemm_staged_workspace_floats(m, n, k)) * 4}));
  EXPECT_FALSE(matmul_tf32());
}

}  // namespace
}  // namespace fitgrad::cpu
