// The RoPE cos/sin table (tensor/cpu/rope.h), built by rotation within blocks of positions
// (Note [RoPE table by rotation]), against cos and sin of each angle evaluated directly in
// double: within one f32 rounding, far along the sequence and for Llama 2's and Llama 3's
// bases, and the same for every thread count.
#include <gtest/gtest.h>

#include "tensor/cpu/rope.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#include <cmath>
#include <vector>

namespace fitgrad::testing {
namespace {

TEST(RopeTable, MatchesTheDirectAnglesWithinOneRounding) {
  struct Case {
    int64_t t, d, offset;
    double theta;
  };
  for (const Case& c : {Case{100, 128, 0, 10000.0}, Case{77, 64, 5000, 500000.0},
                        Case{40, 8, 131000, 10000.0}, Case{1, 2, 3, 10000.0}}) {
    SCOPED_TRACE(::testing::Message()
                 << "T " << c.t << " D " << c.d << " offset " << c.offset << " theta " << c.theta);
    const int64_t half = c.d / 2;
    std::vector<float> table(size_t(2 * c.t * half));
    cpu::rope_table_f32(table.data(), c.t, c.d, c.offset, c.theta);
    double worst = 0;
    for (int64_t t = 0; t < c.t; ++t)
      for (int64_t i = 0; i < half; ++i) {
        const double a = double(c.offset + t) * std::pow(c.theta, -double(2 * i) / double(c.d));
        worst = std::max(worst, std::abs(double(table[t * half + i]) - std::cos(a)));
        worst = std::max(worst, std::abs(double(table[(c.t + t) * half + i]) - std::sin(a)));
      }
    EXPECT_LE(worst, 6e-8);  // one f32 rounding of a value in [-1, 1]
  }
}

TEST(RopeTable, TheThreadCountDoesNotChangeTheBits) {
#ifndef _OPENMP
  GTEST_SKIP() << "built without OpenMP";
#else
  const int64_t t = 300, d = 64;
  std::vector<float> one(size_t(t * d)), two(size_t(t * d));
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  cpu::rope_table_f32(one.data(), t, d, 17, 10000.0);
  omp_set_num_threads(2);
  cpu::rope_table_f32(two.data(), t, d, 17, 10000.0);
  omp_set_num_threads(saved);
  EXPECT_EQ(one, two);
#endif
}

}  // namespace
}  // namespace fitgrad::testing
