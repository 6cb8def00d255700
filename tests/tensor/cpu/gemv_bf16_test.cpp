// The bf16 GEMV (tensor/cpu/gemv_bf16.h) against an fp64 product of the same bf16 values: k
// and n that are not multiples of the 32 values of a load or of the four rows taken at once,
// a leading dimension, bias, f32 and bf16 results; its independence of the thread count; and
// the bf16 linear of one row, a decode step, running on it. Skipped, with a line that says
// so, below the avx512_bf16 level (IsaPaths.* runs it at each level the machine has).
#include "tensor/cpu/gemv_bf16.h"

#include <gtest/gtest.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <cmath>
#include <vector>

#include "tensor/cpu_isa.h"
#include "tensor/ops/matmul.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::testing {
namespace {

#define SKIP_WITHOUT_GEMV()                                               \
  if (!cpu::gemv_bf16_available())                                        \
  GTEST_SKIP() << "no bf16 GEMV at ISA level " << cpu_isa_name(cpu_isa()) \
               << " (it needs AVX512-BF16; one-row bf16 products stay on the GEMM there)"

std::vector<BFloat16> bf16_values(int64_t n, uint64_t seed) {
  const std::vector<double> v = to_f64(random_tensor({n}, seed, DType::bf16));
  std::vector<BFloat16> out;
  for (double x : v) out.push_back(BFloat16(float(x)));
  return out;
}

struct GemvCase {
  int64_t n, k, pad;
  bool bias;
  DType out;
};

TEST(GemvBf16, MatchesAnFp64ProductOfTheSameValues) {
  SKIP_WITHOUT_GEMV();
  const GemvCase cases[] = {{1, 1, 0, false, DType::f32},     {5, 37, 3, true, DType::f32},
                            {130, 576, 0, true, DType::bf16}, {67, 1000, 7, false, DType::f32},
                            {9, 16, 1, true, DType::bf16},    {300, 33, 0, true, DType::bf16},
                            {3, 0, 0, true, DType::f32}};
  for (const GemvCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << "n " << c.n << " k " << c.k << " pad " << c.pad << " bias "
                                      << c.bias << " out " << dtype_name(c.out));
    const int64_t ldb = c.k + c.pad;
    const std::vector<BFloat16> a = bf16_values(std::max<int64_t>(c.k, 1), 1),
                                b = bf16_values(std::max<int64_t>(c.n * ldb, 1), 2),
                                bias = bf16_values(c.n, 3);
    std::vector<float> c32(size_t(c.n) + 1, 7.0f);
    std::vector<BFloat16> c16(size_t(c.n) + 1, BFloat16(7.0f));
    void* out = c.out == DType::f32 ? static_cast<void*>(c32.data()) : c16.data();
    cpu::gemv_bf16(c.n, c.k, a.data(), b.data(), ldb, c.bias ? bias.data() : nullptr, out, c.out);
    for (int64_t j = 0; j <= c.n; ++j) {
      const double got = c.out == DType::f32 ? double(c32[j]) : double(float(c16[j]));
      if (j == c.n) {  // nothing past the end is written
        EXPECT_EQ(got, 7.0);
        continue;
      }
      double want = c.bias ? double(float(bias[j])) : 0.0, scale = std::abs(want);
      for (int64_t p = 0; p < c.k; ++p) {
        const double t = double(float(a[p])) * double(float(b[j * ldb + p]));
        want += t;
        scale += std::abs(t);
      }
      // Exact products summed in f32, then one rounding to the result's dtype.
      const double tol = 2e-5 * scale + (c.out == DType::bf16 ? std::abs(want) / 256 : 0.0);
      EXPECT_NEAR(got, want, tol + 1e-30) << "output " << j;
    }
  }
}

TEST(GemvBf16, TheThreadCountDoesNotChangeTheBits) {
  SKIP_WITHOUT_GEMV();
#ifndef _OPENMP
  GTEST_SKIP() << "built without OpenMP";
#else
  const int64_t n = 1000, k = 300;
  const std::vector<BFloat16> a = bf16_values(k, 4), b = bf16_values(n * k, 5);
  std::vector<float> one(static_cast<size_t>(n)), two(static_cast<size_t>(n));
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  cpu::gemv_bf16(n, k, a.data(), b.data(), k, nullptr, one.data(), DType::f32);
  omp_set_num_threads(2);
  cpu::gemv_bf16(n, k, a.data(), b.data(), k, nullptr, two.data(), DType::f32);
  omp_set_num_threads(saved);
  EXPECT_EQ(one, two);
#endif
}

// A bf16 linear of one row (a decode step) is the GEMV's product, bit for bit.
TEST(GemvBf16, ALinearOfOneRowRunsOnIt) {
  SKIP_WITHOUT_GEMV();
  const int64_t n = 70, k = 96;
  const Tensor x = random_tensor({1, k}, 6, DType::bf16);
  const Tensor w = random_tensor({n, k}, 7, DType::bf16);
  const Tensor bias = random_tensor({n}, 8, DType::bf16);
  const Tensor y = ops::linear(x, w, bias);  // (1, n)
  std::vector<BFloat16> want(static_cast<size_t>(n));
  cpu::gemv_bf16(n, k, x.data<BFloat16>(), w.data<BFloat16>(), k, bias.data<BFloat16>(),
                 want.data(), DType::bf16);
  const std::vector<double> got = to_f64(y);
  for (int64_t j = 0; j < n; ++j) EXPECT_EQ(got[j], double(float(want[j]))) << j;
}

}  // namespace
}  // namespace fitgrad::testing
