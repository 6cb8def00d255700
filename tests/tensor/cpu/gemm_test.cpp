// fp32 GEMM (tensor/cpu/gemm.h) against an fp64 reference loop, for every backend that was
// built: all four transpose combinations, odd sizes, alpha/beta variants, padded leading
// dimensions, the batched variant, run-to-run bitwise reproducibility, and the errors that
// bad arguments raise. The tolerance grows with sqrt(k), relative to sum_p |a_ip b_pj|.
#include "tensor/cpu/gemm.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tensor/error.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::cpu {
namespace {

using ::testing::HasSubstr;

std::vector<float> random_vector(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// Operands of one product, stored row-major with padded leading dimensions.
struct Problem {
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  std::vector<float> a, b, c;  // (m,k)|(k,m), (k,n)|(n,k), (m,n), padded rows

  Problem(bool ta_, bool tb_, int64_t m_, int64_t n_, int64_t k_, int64_t pad, uint32_t seed)
      : ta(ta_), tb(tb_), m(m_), n(n_), k(k_) {
    const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k;
    const int64_t b_rows = tb ? n : k, b_cols = tb ? k : n;
    lda = std::max<int64_t>(1, a_cols) + pad;
    ldb = std::max<int64_t>(1, b_cols) + pad;
    ldc = std::max<int64_t>(1, n) + pad;
    a = random_vector(size_t(std::max<int64_t>(1, a_rows * lda)), seed);
    b = random_vector(size_t(std::max<int64_t>(1, b_rows * ldb)), seed + 1);
    c = random_vector(size_t(std::max<int64_t>(1, m * ldc)), seed + 2);
  }
  double at_a(int64_t i, int64_t p) const { return ta ? a[p * lda + i] : a[i * lda + p]; }
  double at_b(int64_t p, int64_t j) const { return tb ? b[j * ldb + p] : b[p * ldb + j]; }
  void run(float alpha, float beta, std::vector<float>& out) const {
    gemm_f32(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, out.data(), ldc);
  }
};

// Checks out == alpha * op(A) op(B) + beta * c0 in fp64, elementwise, and that the padding
// between rows of C was left untouched.
void expect_matches_reference(const Problem& p, float alpha, float beta,
                              const std::vector<float>& c0, const std::vector<float>& out) {
  const double tol = 1e-5 * std::sqrt(double(std::max<int64_t>(1, p.k)));
  int bad = 0;
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.ldc; ++j) {
      const size_t at = size_t(i * p.ldc + j);
      if (j >= p.n) {
        EXPECT_EQ(std::memcmp(&out[at], &c0[at], sizeof(float)), 0)
            << "padding (" << i << "," << j << ") was written";
        continue;
      }
      double acc = 0, mag = 0;
      for (int64_t q = 0; q < p.k; ++q) {
        acc += p.at_a(i, q) * p.at_b(q, j);
        mag += std::abs(p.at_a(i, q) * p.at_b(q, j));
      }
      const double c_in = beta == 0.0f ? 0.0 : double(beta) * c0[at];
      const double want = double(alpha) * acc + c_in;
      const double scale = std::abs(double(alpha)) * mag + std::abs(c_in) + 1e-30;
      if (!(std::abs(out[at] - want) <= tol * scale) && ++bad <= 5) {
        ADD_FAILURE() << "C(" << i << "," << j << ") = " << out[at] << ", want " << want << " (tol "
                      << tol * scale << ")";
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

struct Shape3 {
  int64_t m, n, k;
};
struct AlphaBeta {
  float alpha, beta;
};

class GemmTest : public ::testing::TestWithParam<GemmBackend> {
 protected:
  void SetUp() override {
    if (!gemm_backend_available(GetParam())) GTEST_SKIP() << "backend not available here";
    saved_ = gemm_backend();
    set_gemm_backend(GetParam());
  }
  void TearDown() override {
    if (gemm_backend_available(GetParam())) set_gemm_backend(saved_);
  }
  GemmBackend saved_ = GemmBackend::eigen;
};

TEST_P(GemmTest, MatchesFp64Reference) {
  const Shape3 shapes[] = {{1, 1, 1},    {7, 13, 5}, {64, 33, 17}, {257, 129, 65}, {1, 300, 40},
                           {300, 1, 40}, {0, 5, 3},  {5, 0, 3},    {4, 6, 0}};
  const AlphaBeta coefs[] = {{1, 0}, {1, 1}, {-0.5f, 2}, {0, 0.5f}, {1.5f, -1}};
  uint32_t seed = 1;
  for (const Shape3& s : shapes) {
    for (int t = 0; t < 4; ++t) {
      for (const AlphaBeta& ab : coefs) {
        for (int64_t pad : {0, 3}) {
          const bool ta = t & 1, tb = t & 2;
          SCOPED_TRACE(::testing::Message() << "m=" << s.m << " n=" << s.n << " k=" << s.k
                                            << " ta=" << ta << " tb=" << tb << " alpha=" << ab.alpha
                                            << " beta=" << ab.beta << " pad=" << pad);
          const Problem p(ta, tb, s.m, s.n, s.k, pad, seed++);
          std::vector<float> out = p.c;
          p.run(ab.alpha, ab.beta, out);
          expect_matches_reference(p, ab.alpha, ab.beta, p.c, out);
        }
      }
    }
  }
}

// Large enough that both backends split the work over threads and block over k.
TEST_P(GemmTest, LargeOddShapeMatchesReference) {
  for (int t = 0; t < 4; ++t) {
    SCOPED_TRACE(t);
    const Problem p(t & 1, t & 2, 301, 517, 389, 1, 77 + t);
    std::vector<float> out = p.c;
    p.run(0.75f, 0.25f, out);
    expect_matches_reference(p, 0.75f, 0.25f, p.c, out);
  }
}

// A side longer than oneDNN's panel (16384, Note [Panels of a long output] in gemm.cpp), with
// an uneven last panel, in rows, in columns and in k (panels summed into C, beta applied
// once), every transpose, padded, beta kept.
TEST_P(GemmTest, AVocabularyLongSideMatchesReference) {
  const Shape3 shapes[] = {{40001, 3, 7}, {3, 40001, 7}, {5, 3, 40001}};
  uint32_t seed = 500;
  for (const Shape3& s : shapes) {
    for (int t = 0; t < 4; ++t) {
      SCOPED_TRACE(::testing::Message()
                   << "m=" << s.m << " n=" << s.n << " k=" << s.k << " t=" << t);
      const Problem p(t & 1, t & 2, s.m, s.n, s.k, 2, seed++);
      std::vector<float> out = p.c;
      p.run(1.25f, 0.5f, out);
      expect_matches_reference(p, 1.25f, 0.5f, p.c, out);
    }
  }
}

TEST_P(GemmTest, BetaZeroOverwritesNaNAndAlphaZeroIgnoresAB) {
  const Problem p(false, false, 9, 11, 7, 2, 5);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> out(p.c.size(), nan);
  p.run(1.0f, 0.0f, out);
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) ASSERT_FALSE(std::isnan(out[i * p.ldc + j]));
  // alpha == 0: C = beta * C, and A and B are never read (they may be null).
  std::vector<float> c = p.c;
  gemm_f32(false, false, p.m, p.n, p.k, 0.0f, nullptr, p.lda, nullptr, p.ldb, 2.0f, c.data(),
           p.ldc);
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) ASSERT_EQ(c[i * p.ldc + j], 2.0f * p.c[i * p.ldc + j]);
}

TEST_P(GemmTest, BatchedMatchesOneGemmPerMatrix) {
  struct Row {
    bool ta, tb;
    int64_t batch, m, n, k;
    bool broadcast_b;  // stride_b = 0: one B for every matrix (linear over a batch)
  };
  const Row rows[] = {{false, false, 3, 7, 13, 5, false},
                      {true, false, 4, 64, 33, 17, false},
                      {false, true, 2, 33, 65, 129, true},
                      {true, true, 5, 17, 9, 31, false},
                      {false, false, 0, 4, 4, 4, false}};
  for (const Row& r : rows) {
    SCOPED_TRACE(::testing::Message() << "batch=" << r.batch << " m=" << r.m << " n=" << r.n
                                      << " k=" << r.k << " ta=" << r.ta << " tb=" << r.tb);
    std::vector<Problem> ps;
    for (int64_t i = 0; i < r.batch; ++i) ps.emplace_back(r.ta, r.tb, r.m, r.n, r.k, 2, 100 + i);
    if (r.broadcast_b)
      for (Problem& p : ps) p.b = ps[0].b;
    const Problem shape(r.ta, r.tb, r.m, r.n, r.k, 2, 0);
    const int64_t sa = int64_t(shape.a.size()) + 5, sb = int64_t(shape.b.size()) + 5,
                  sc = int64_t(shape.c.size()) + 5;
    std::vector<float> a(size_t(std::max<int64_t>(1, r.batch * sa))),
        b(size_t(std::max<int64_t>(1, r.batch * sb))),
        c(size_t(std::max<int64_t>(1, r.batch * sc)));
    for (int64_t i = 0; i < r.batch; ++i) {
      std::copy(ps[i].a.begin(), ps[i].a.end(), a.begin() + i * sa);
      std::copy(ps[i].b.begin(), ps[i].b.end(), b.begin() + i * sb);
      std::copy(ps[i].c.begin(), ps[i].c.end(), c.begin() + i * sc);
    }
    gemm_f32_batched(r.ta, r.tb, r.batch, r.m, r.n, r.k, 1.25f, a.data(), shape.lda, sa, b.data(),
                     shape.ldb, r.broadcast_b ? 0 : sb, 0.5f, c.data(), shape.ldc, sc);
    for (int64_t i = 0; i < r.batch; ++i) {
      std::vector<float> out = ps[i].c;
      ps[i].run(1.25f, 0.5f, out);
      ASSERT_EQ(std::memcmp(out.data(), c.data() + i * sc, out.size() * sizeof(float)), 0)
          << "matrix " << i << " differs from gemm_f32";
      expect_matches_reference(ps[i], 1.25f, 0.5f, ps[i].c, out);
    }
  }
}

// Note [One thread budget]: the GEMM starts from OpenMP's thread count, so OMP_NUM_THREADS
// (which `fitgrad launch` sets to each rank's share of the cores) bounds it too. CTest also
// runs this under OMP_NUM_THREADS=1 (GemmThreads.OneBudget in tests/CMakeLists.txt), where
// taking every hardware thread would give 2 or more on any machine with 2 cores.
#ifdef _OPENMP
TEST(GemmThreads, StartFromOpenMpsBudget) {
  EXPECT_EQ(gemm_threads(), std::max(1, omp_get_max_threads()));
  if (const char* budget = std::getenv("OMP_NUM_THREADS")) {
    EXPECT_EQ(gemm_threads(), std::atoi(budget));
  }
}
#endif

// DESIGN.md, Numerics: bitwise reproducible run to run for a fixed thread count.
TEST_P(GemmTest, TwoRunsAreBitwiseEqual) {
  const int saved_threads = gemm_threads();
  for (int threads : {1, 2, 3}) {
    set_gemm_threads(threads);
    for (int t = 0; t < 4; ++t) {
      SCOPED_TRACE(::testing::Message() << "threads=" << threads << " combo=" << t);
      const Problem p(t & 1, t & 2, 333, 611, 517, 0, 900 + t);
      std::vector<float> first = p.c, second = p.c;
      p.run(1.0f, 1.0f, first);
      p.run(1.0f, 1.0f, second);
      ASSERT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0);
    }
  }
  set_gemm_threads(saved_threads);
}

INSTANTIATE_TEST_SUITE_P(Backends, GemmTest,
                         ::testing::Values(GemmBackend::eigen, GemmBackend::openblas,
                                           GemmBackend::dnnl, GemmBackend::mkl),
                         [](const auto& info) {
                           return std::string(gemm_backend_name(info.param));
                         });

using fitgrad::testing::error_of;

TEST(GemmErrorTest, BadArgumentsNameTheCulprit) {
  std::vector<float> a(64), b(64), c(64);
  const float *pa = a.data(), *pb = b.data();
  float* pc = c.data();
  struct Row {
    const char* expect;
    std::function<void()> call;
  };
  const Row rows[] = {
      {"[gemm] m = -1 is negative",
       [&] { gemm_f32(false, false, -1, 2, 2, 1, pa, 2, pb, 2, 0, pc, 2); }},
      {"[gemm] n = -2 is negative",
       [&] { gemm_f32(false, false, 2, -2, 2, 1, pa, 2, pb, 2, 0, pc, 2); }},
      {"[gemm] k = -3 is negative",
       [&] { gemm_f32(false, false, 2, 2, -3, 1, pa, 2, pb, 2, 0, pc, 2); }},
      {"[gemm] lda = 3 is smaller than A's row width 4",
       [&] { gemm_f32(false, false, 2, 2, 4, 1, pa, 3, pb, 2, 0, pc, 2); }},
      {"[gemm] lda = 2 is smaller than A's row width 5 (trans_a = true",
       [&] { gemm_f32(true, false, 5, 2, 2, 1, pa, 2, pb, 2, 0, pc, 2); }},
      {"[gemm] ldb = 1 is smaller than B's row width 2",
       [&] { gemm_f32(false, false, 2, 2, 2, 1, pa, 2, pb, 1, 0, pc, 2); }},
      {"[gemm] ldb = 2 is smaller than B's row width 3 (trans_b = true",
       [&] { gemm_f32(false, true, 2, 2, 3, 1, pa, 3, pb, 2, 0, pc, 2); }},
      {"[gemm] ldc = 1 is smaller than C's row width n = 2",
       [&] { gemm_f32(false, false, 2, 2, 2, 1, pa, 2, pb, 2, 0, pc, 1); }},
      {"[gemm] lda = 0", [&] { gemm_f32(false, false, 0, 0, 0, 1, pa, 0, pb, 1, 0, pc, 1); }},
      {"[gemm] C is null",
       [&] { gemm_f32(false, false, 2, 2, 2, 1, pa, 2, pb, 2, 0, nullptr, 2); }},
      {"[gemm] A is null",
       [&] { gemm_f32(false, false, 2, 2, 2, 1, nullptr, 2, pb, 2, 0, pc, 2); }},
      {"[gemm] B is null",
       [&] { gemm_f32(false, false, 2, 2, 2, 1, pa, 2, nullptr, 2, 0, pc, 2); }},
      {"[gemm] batch = -1 is negative",
       [&] { gemm_f32_batched(false, false, -1, 2, 2, 2, 1, pa, 2, 4, pb, 2, 4, 0, pc, 2, 4); }},
      {"[gemm] stride_a = -4 is negative",
       [&] { gemm_f32_batched(false, false, 2, 2, 2, 2, 1, pa, 2, -4, pb, 2, 4, 0, pc, 2, 4); }},
      {"[gemm] stride_b = -4 is negative",
       [&] { gemm_f32_batched(false, false, 2, 2, 2, 2, 1, pa, 2, 4, pb, 2, -4, 0, pc, 2, 4); }},
      {"[gemm] stride_c = 3 makes C's matrices overlap",
       [&] { gemm_f32_batched(false, false, 2, 2, 2, 2, 1, pa, 2, 4, pb, 2, 4, 0, pc, 2, 3); }},
      {"[gemm] lda = 1 is smaller",
       [&] { gemm_f32_batched(false, false, 2, 2, 2, 2, 1, pa, 1, 4, pb, 2, 4, 0, pc, 2, 4); }},
      {"[gemm] thread count 0 is not positive", [&] { set_gemm_threads(0); }},
  };
  for (const Row& r : rows) EXPECT_THAT(error_of(r.call), HasSubstr(r.expect));
  if (!gemm_backend_available(GemmBackend::openblas)) {
    EXPECT_THAT(error_of([] { set_gemm_backend(GemmBackend::openblas); }),
                HasSubstr("[gemm] backend openblas is not available: this build has no OpenBLAS"));
  }
  if (!gemm_backend_available(GemmBackend::mkl)) {
    EXPECT_THAT(error_of([] { set_gemm_backend(GemmBackend::mkl); }),
                HasSubstr("[gemm] backend mkl is not available: oneMKL not found"));
  }
}

}  // namespace
}  // namespace fitgrad::cpu
