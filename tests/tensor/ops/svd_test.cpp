// svd_basis_ (GaLore's projection) against a matrix built from known factors: A = U diag(s)
// V^T with U, V products of Householder reflections (made here, independently of Eigen) and
// well-separated s; the op must return U's or V's first r columns with Note [Singular vector
// signs] applied, on both sides, into f32 and bf16; a non-finite value, a rank above min(m, n)
// and a misshaped output are errors naming the op.
#include "tensor/ops/svd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::ops {
namespace {

using Matrix = std::vector<std::vector<double>>;  // [row][col]

// An (n, n) orthogonal matrix: the product of three Householder reflections I - 2 v v^T / v^T v.
Matrix orthogonal(int64_t n, uint64_t seed) {
  Matrix q(size_t(n), std::vector<double>(size_t(n), 0.0));
  for (int64_t i = 0; i < n; ++i) q[size_t(i)][size_t(i)] = 1;
  const Tensor r = testing::random_tensor({3, n}, seed);
  for (int64_t h = 0; h < 3; ++h) {
    std::vector<double> v(static_cast<size_t>(n));
    double vv = 0;
    for (int64_t i = 0; i < n; ++i)
      vv += (v[size_t(i)] = r.data<float>()[h * n + i]) * v[size_t(i)];
    for (auto& row : q) {  // q <- q (I - 2 v v^T / vv)
      double dot = 0;
      for (int64_t i = 0; i < n; ++i) dot += row[size_t(i)] * v[size_t(i)];
      for (int64_t i = 0; i < n; ++i) row[size_t(i)] -= 2 * dot / vv * v[size_t(i)];
    }
  }
  return q;
}

// Column j of q, signed so that its first entry of largest magnitude is positive.
std::vector<double> signed_column(const Matrix& q, int64_t j) {
  size_t top = 0;
  for (size_t i = 1; i < q.size(); ++i)
    if (std::fabs(q[i][size_t(j)]) > std::fabs(q[top][size_t(j)])) top = i;
  std::vector<double> c;
  for (const auto& row : q) c.push_back(q[top][size_t(j)] < 0 ? -row[size_t(j)] : row[size_t(j)]);
  return c;
}

struct Case {
  int64_t m, n, r;
};

TEST(SvdBasis, RecoversTheKnownFactorsWithFixedSigns) {
  for (const Case c : {Case{7, 5, 3}, Case{5, 9, 2}, Case{6, 6, 6}})
    for (bool left : {true, false})
      for (DType dtype : {DType::f32, DType::bf16}) {
        SCOPED_TRACE(::testing::Message() << c.m << "x" << c.n << " r " << c.r << " left " << left
                                          << " " << dtype_name(dtype));
        const Matrix u = orthogonal(c.m, 11), v = orthogonal(c.n, 12);
        const int64_t k = std::min(c.m, c.n);
        std::vector<float> a(size_t(c.m * c.n), 0.0f);
        for (int64_t i = 0; i < c.m; ++i)
          for (int64_t j = 0; j < c.n; ++j) {
            double x = 0;
            for (int64_t l = 0; l < k; ++l)
              x += u[size_t(i)][size_t(l)] * std::pow(2.0, -double(l)) * v[size_t(j)][size_t(l)];
            a[size_t(i * c.n + j)] = float(x);
          }
        const Tensor at = Tensor::from_vector(a, {c.m, c.n}, DType::f32).to(dtype);
        const Tensor out = Tensor::zeros(left ? Shape{c.m, c.r} : Shape{c.r, c.n}, dtype);
        svd_basis_(at, out, left);
        const Tensor got = out.to(DType::f32);
        const double tol = dtype == DType::f32 ? 1e-5 : 2e-2;
        for (int64_t j = 0; j < c.r; ++j) {
          const std::vector<double> want = signed_column(left ? u : v, j);
          for (size_t i = 0; i < want.size(); ++i) {
            const float g = left ? got.data<float>()[int64_t(i) * c.r + j]
                                 : got.data<float>()[j * c.n + int64_t(i)];
            EXPECT_NEAR(g, want[i], tol) << "vector " << j << " entry " << i;
          }
        }
      }
}

TEST(SvdBasis, ErrorsNameTheOp) {
  const Tensor a = testing::random_tensor({4, 6}, 3);
  testing::expect_error(
      [&] {
        svd_basis_(a, Tensor::zeros({4, 5}), true);
      },
      "[svd_basis]", "rank 5");
  testing::expect_error([&] { svd_basis_(a, Tensor::zeros({3, 2}), true); }, "[svd_basis]", "out");
  Tensor bad = a.clone();
  bad.data<float>()[7] = INFINITY;
  testing::expect_error(
      [&] {
        svd_basis_(bad, Tensor::zeros({4, 2}), true);
      },
      "[svd_basis]", "non-finite");
}

}  // namespace
}  // namespace fitgrad::ops
