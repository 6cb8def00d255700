// TF32 emulation (Note [TF32 on the CPU] in tensor/cpu/gemm.h): the rounding against values
// worked out by hand from the format (10 explicit mantissa bits, ties to even), and a gemm in
// TF32 mode against an fp64 product of the rounded operands.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "tensor/backend/math_mode.h"
#include "tensor/cpu/gemm.h"

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

TEST(Tf32, GemmMatchesAnFp64ProductOfRoundedOperands) {
  const int64_t m = 33, n = 17, k = 130;
  std::mt19937 rng(5);
  std::normal_distribution<float> dist;
  std::vector<float> a(m * k), b(n * k);  // A (m, k), B stored (n, k): op(B) = B^T
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);
  std::vector<float> exact(m * n), tf32(m * n);
  gemm_f32(false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, exact.data(), n);
  {
    Tf32Mode on(true);
    gemm_f32(false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, tf32.data(), n);
  }
  double max_err = 0, max_shift = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0;
      for (int64_t p = 0; p < k; ++p)
        ref += double(round_to_tf32(a[i * k + p])) * double(round_to_tf32(b[j * k + p]));
      max_err = std::max(max_err, std::abs(tf32[i * n + j] - ref));
      max_shift = std::max(max_shift, double(std::abs(tf32[i * n + j] - exact[i * n + j])));
    }
  EXPECT_LT(max_err, 1e-4);    // fp32 accumulation of 130 terms of size ~1
  EXPECT_GT(max_shift, 1e-3);  // and the rounding really happened: TF32 is far coarser
  EXPECT_FALSE(matmul_tf32());
}

}  // namespace
}  // namespace fitgrad::cpu
