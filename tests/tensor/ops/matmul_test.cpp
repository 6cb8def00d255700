// matmul and linear front-ends against fp64 loops: transposes, batch broadcasting,
// dtypes, meta, and the errors for bad shapes.
#include "tensor/ops/matmul.h"

#include "tensor/memory/caching_allocator.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::testing {
namespace {

// Reference: (batch..., m, n) from row-major doubles, batch broadcasting by index math.
std::vector<double> ref_matmul(const Tensor& a, const Tensor& b, bool ta, bool tb,
                               const Shape& out) {
  const auto av = to_f64(a), bv = to_f64(b);
  const int64_t m = out[out.size() - 2], n = out.back();
  const int64_t k = ta ? a.size(-2) : a.size(-1);
  const Shape batch(out.begin(), out.end() - 2);
  const int64_t nb = numel(batch);
  auto batch_index = [&](const Tensor& t, int64_t flat) {
    // Map a flat index of `batch` to the flat batch index of t (size-1 dims broadcast).
    const int64_t tdims = t.dim() - 2;
    int64_t idx = 0, mul = 1;
    for (int64_t d = int64_t(batch.size()) - 1, td = tdims - 1; d >= 0; --d, --td) {
      const int64_t i = flat % batch[size_t(d)];
      flat /= batch[size_t(d)];
      if (td < 0) continue;
      const int64_t size = t.size(td);
      idx += (size == 1 ? 0 : i) * mul;
      mul *= size;
    }
    return idx;
  };
  std::vector<double> y(size_t(nb * m * n), 0.0);
  const int64_t ar = a.size(-2), ac = a.size(-1), br = b.size(-2), bc = b.size(-1);
  for (int64_t z = 0; z < nb; ++z) {
    const int64_t za = batch_index(a, z), zb = batch_index(b, z);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double x =
              ta ? av[size_t(za * ar * ac + p * ac + i)] : av[size_t(za * ar * ac + i * ac + p)];
          const double w =
              tb ? bv[size_t(zb * br * bc + j * bc + p)] : bv[size_t(zb * br * bc + p * bc + j)];
          s += x * w;
        }
        y[size_t((z * m + i) * n + j)] = s;
      }
  }
  return y;
}

struct MatmulCase {
  Shape a, b;
  bool ta, tb;
  Shape out;
};

TEST(Matmul, MatchesFp64ReferenceAcrossTransposesAndBroadcasts) {
  const MatmulCase cases[] = {
      {{1, 1}, {1, 1}, false, false, {1, 1}},
      {{7, 5}, {5, 13}, false, false, {7, 13}},
      {{5, 7}, {5, 13}, true, false, {7, 13}},
      {{7, 5}, {13, 5}, false, true, {7, 13}},
      {{5, 7}, {13, 5}, true, true, {7, 13}},
      {{3, 64, 33}, {3, 33, 17}, false, false, {3, 64, 17}},
      {{3, 64, 33}, {33, 17}, false, false, {3, 64, 17}},
      {{2, 1, 8, 6}, {1, 3, 6, 4}, false, false, {2, 3, 8, 4}},
      {{4, 2, 6, 8}, {4, 2, 5, 8}, false, true, {4, 2, 6, 5}},
  };
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    for (const MatmulCase& c : cases) {
      SCOPED_TRACE(shape_str(c.a) + " @ " + shape_str(c.b) + " " + std::string(dtype_name(dt)));
      const Tensor a = random_tensor(c.a, 1, dt), b = random_tensor(c.b, 2, dt);
      const Tensor y = ops::matmul(a, b, c.ta, c.tb);
      ASSERT_EQ(y.shape(), c.out);
      EXPECT_EQ(y.dtype(), dt);
      EXPECT_TRUE(close_for(dt, to_f64(y), ref_matmul(a, b, c.ta, c.tb, c.out)));
    }
  }
}

TEST(Matmul, TransposedViewsNeedNoFlag) {
  const Tensor a = random_tensor({6, 4}, 3), b = random_tensor({5, 6}, 4);
  const Tensor y = ops::matmul(a.transpose(0, 1), b.transpose(0, 1));  // (4,6) @ (6,5)
  EXPECT_TRUE(all_close(to_f64(y), ref_matmul(a, b, true, true, {4, 5}), 1e-5, 1e-6));
}

TEST(Linear, MatchesFp64Reference) {
  const Tensor x = random_tensor({2, 3, 8}, 5), w = random_tensor({4, 8}, 6),
               b = random_tensor({4}, 7);
  const Tensor y = ops::linear(x, w, b);
  ASSERT_EQ(y.shape(), (Shape{2, 3, 4}));
  std::vector<double> want = ref_matmul(x.reshape({6, 8}), w, false, true, {6, 4});
  const auto bv = to_f64(b);
  for (size_t i = 0; i < want.size(); ++i) want[i] += bv[i % 4];
  EXPECT_TRUE(all_close(to_f64(y), want, 1e-5, 1e-6));
  EXPECT_TRUE(all_close(to_f64(ops::linear(x, w, Tensor())),
                        ref_matmul(x.reshape({6, 8}), w, false, true, {6, 4}), 1e-5, 1e-6));
}

TEST(Matmul, BadShapesNameTheOp) {
  const Tensor a = random_tensor({4, 8}, 1), b = random_tensor({9, 2}, 2);
  try {
    ops::matmul(a, b);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[matmul] shapes (4, 8) and (9, 2) do not align"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ops::matmul(random_tensor({2, 4, 8}, 1), random_tensor({3, 8, 2}, 1)), Error);
  EXPECT_THROW(ops::matmul(random_tensor({8}, 1), random_tensor({8, 2}, 1)), Error);
  EXPECT_THROW(ops::linear(a, random_tensor({3, 7}, 1), Tensor()), Error);
  EXPECT_THROW(ops::linear(a, random_tensor({3, 8}, 1), random_tensor({4}, 1)), Error);
  EXPECT_THROW(ops::matmul(a, Tensor::zeros({8, 2}, DType::i32)), Error);
}

TEST(Matmul, MetaAllocatesTheOutputOnly) {
  const Tensor a = Tensor::empty({2, 64, 32}, DType::f32, Device::meta());
  const Tensor b = Tensor::empty({32, 16}, DType::f32, Device::meta());
  const Tensor y = ops::matmul(a, b);
  EXPECT_EQ(y.shape(), (Shape{2, 64, 16}));
  EXPECT_EQ(y.device(), Device::meta());
}

}  // namespace
}  // namespace fitgrad::testing
