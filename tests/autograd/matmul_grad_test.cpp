// matmul and linear backward rules (autograd/functions_nn.cpp) against central finite
// differences of an fp64 reference, for every transpose combination and batch broadcasts.
#include "autograd/functions.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::autograd {
namespace {

using namespace fitgrad::testing;

// sum(R * op(A) @ op(B)) in fp64 with batch broadcasting; a, b, r row-major.
double ref_loss(const std::vector<double>& a, const Shape& sa, bool ta,
                const std::vector<double>& b, const Shape& sb, bool tb,
                const std::vector<double>& r, const Shape& out) {
  const int64_t m = out[out.size() - 2], n = out.back();
  const int64_t k = ta ? sa[sa.size() - 2] : sa.back();
  const int64_t ar = sa[sa.size() - 2], ac = sa.back(), br = sb[sb.size() - 2], bc = sb.back();
  const Shape batch(out.begin(), out.end() - 2);
  auto index = [&](const Shape& s, int64_t flat) {
    int64_t idx = 0, mul = 1;
    const int64_t tdims = int64_t(s.size()) - 2;
    for (int64_t d = int64_t(batch.size()) - 1, td = tdims - 1; d >= 0; --d, --td) {
      const int64_t i = flat % batch[size_t(d)];
      flat /= batch[size_t(d)];
      if (td < 0) continue;
      idx += (s[size_t(td)] == 1 ? 0 : i) * mul;
      mul *= s[size_t(td)];
    }
    return idx;
  };
  double loss = 0;
  for (int64_t z = 0; z < numel(batch); ++z) {
    const int64_t za = index(sa, z) * ar * ac, zb = index(sb, z) * br * bc;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += (ta ? a[size_t(za + p * ac + i)] : a[size_t(za + i * ac + p)]) *
               (tb ? b[size_t(zb + j * bc + p)] : b[size_t(zb + p * bc + j)]);
        loss += r[size_t((z * m + i) * n + j)] * s;
      }
  }
  return loss;
}

struct Case {
  Shape a, b;
  bool ta, tb;
  Shape out;
};

TEST(MatmulGrad, MatchesFp64FiniteDifferences) {
  const Case cases[] = {
      {{3, 4}, {4, 5}, false, false, {3, 5}},
      {{4, 3}, {4, 5}, true, false, {3, 5}},
      {{3, 4}, {5, 4}, false, true, {3, 5}},
      {{4, 3}, {5, 4}, true, true, {3, 5}},
      {{2, 3, 4}, {4, 5}, false, false, {2, 3, 5}},
      {{2, 1, 3, 4}, {1, 3, 5, 4}, false, true, {2, 3, 3, 5}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.a) + (c.ta ? "^T" : "") + " @ " + shape_str(c.b) + (c.tb ? "^T" : ""));
    Tensor a = random_tensor(c.a, 1), b = random_tensor(c.b, 2);
    const Tensor r = random_tensor(c.out, 3);
    set_requires_grad(a);
    set_requires_grad(b);
    backward(sum(mul(matmul(a, b, c.ta, c.tb), r)));
    const auto av = to_f64(a), bv = to_f64(b), rv = to_f64(r);
    const auto da = finite_diff(
        [&](const std::vector<double>& x) {
          return ref_loss(x, c.a, c.ta, bv, c.b, c.tb, rv, c.out);
        },
        av);
    const auto db = finite_diff(
        [&](const std::vector<double>& x) {
          return ref_loss(av, c.a, c.ta, x, c.b, c.tb, rv, c.out);
        },
        bv);
    EXPECT_TRUE(all_close(to_f64(grad(a)), da, 1e-5, 1e-5));
    EXPECT_TRUE(all_close(to_f64(grad(b)), db, 1e-5, 1e-5));
  }
}

TEST(MatmulGrad, LinearMatchesFp64FiniteDifferences) {
  Tensor x = random_tensor({2, 3, 4}, 4), w = random_tensor({5, 4}, 5),
         bias = random_tensor({5}, 6);
  const Tensor r = random_tensor({2, 3, 5}, 7);
  for (Tensor* t : {&x, &w, &bias}) set_requires_grad(*t);
  backward(sum(mul(linear(x, w, bias), r)));
  const auto xv = to_f64(x), wv = to_f64(w), bv = to_f64(bias), rv = to_f64(r);
  auto loss = [&](const std::vector<double>& X, const std::vector<double>& W,
                  const std::vector<double>& B) {
    double s = 0;
    for (int64_t row = 0; row < 6; ++row)
      for (int64_t o = 0; o < 5; ++o) {
        double y = B[size_t(o)];
        for (int64_t i = 0; i < 4; ++i) y += X[size_t(row * 4 + i)] * W[size_t(o * 4 + i)];
        s += rv[size_t(row * 5 + o)] * y;
      }
    return s;
  };
  EXPECT_TRUE(all_close(to_f64(grad(x)),
                        finite_diff([&](const auto& v) { return loss(v, wv, bv); }, xv), 1e-5,
                        1e-5));
  EXPECT_TRUE(all_close(to_f64(grad(w)),
                        finite_diff([&](const auto& v) { return loss(xv, v, bv); }, wv), 1e-5,
                        1e-5));
  EXPECT_TRUE(all_close(to_f64(grad(bias)),
                        finite_diff([&](const auto& v) { return loss(xv, wv, v); }, bv), 1e-5,
                        1e-5));
}

}  // namespace
}  // namespace fitgrad::autograd
