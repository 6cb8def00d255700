// softmax / log_softmax: forward against an fp64 reference, backward against finite
// differences of that reference, for several shapes, dims and dtypes (one table row each);
// then errors and meta allocation.
#include "tensor/ops/softmax.h"

#include <cmath>
#include <functional>
#include <string>
#include <utility>

#include "tensor/ops/elementwise.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::testing {
namespace {

struct SoftmaxCase {
  const char* name;
  Shape shape;
  int64_t dim;
  DType dtype;
  bool log;
};

std::vector<SoftmaxCase> softmax_cases() {
  struct Base {
    const char* name;
    Shape shape;
    int64_t dim;
  };
  const Base bases[] = {
      {"rows", {4, 7}, -1},  {"middle", {3, 5, 4}, 1}, {"first", {6, 2, 3}, 0},
      {"single", {2, 1}, 1}, {"vector", {9}, 0},
  };
  std::vector<SoftmaxCase> out;
  for (const Base& b : bases)
    for (DType dt : {DType::f32, DType::bf16, DType::f16})
      for (bool log : {false, true}) out.push_back({b.name, b.shape, b.dim, dt, log});
  return out;
}

// Calls fn(at, n) once per row along dim of a row-major `shape`: at(i) is the flat index of
// the row's i-th element, n the row's length.
void for_each_row(const Shape& shape, int64_t dim,
                  const std::function<void(const std::function<size_t(int64_t)>&, int64_t)>& fn) {
  const int64_t d = dim < 0 ? dim + int64_t(shape.size()) : dim;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < int64_t(shape.size()); ++i) {
    if (i < d) outer *= shape[size_t(i)];
    if (i > d) inner *= shape[size_t(i)];
  }
  const int64_t n = shape[size_t(d)];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < inner; ++k)
      fn([&](int64_t i) { return size_t((o * n + i) * inner + k); }, n);
}

// fp64 (log_)softmax of row-major x along dim d of `shape`.
std::vector<double> reference(const std::vector<double>& x, const Shape& shape, int64_t dim,
                              bool log) {
  std::vector<double> y(x.size());
  for_each_row(shape, dim, [&](const auto& at, int64_t n) {
    double max = -INFINITY, sum = 0;
    for (int64_t i = 0; i < n; ++i) max = std::max(max, x[at(i)]);
    for (int64_t i = 0; i < n; ++i) sum += std::exp(x[at(i)] - max);
    for (int64_t i = 0; i < n; ++i)
      y[at(i)] = log ? x[at(i)] - max - std::log(sum) : std::exp(x[at(i)] - max) / sum;
  });
  return y;
}

class SoftmaxTest : public ::testing::TestWithParam<SoftmaxCase> {};

TEST_P(SoftmaxTest, ForwardMatchesFp64Reference) {
  const SoftmaxCase& c = GetParam();
  const Tensor x = random_tensor(c.shape, 1, c.dtype, -3, 3);
  const Tensor y = c.log ? ops::log_softmax(x, c.dim) : ops::softmax(x, c.dim);
  EXPECT_EQ(y.shape(), c.shape);
  EXPECT_EQ(y.dtype(), c.dtype);
  EXPECT_TRUE(close_for(c.dtype, to_f64(y), reference(to_f64(x), c.shape, c.dim, c.log)));
}

// The vector-Jacobian product in fp64 from the y that the backward is given (rounded into
// the dtype by the forward): softmax dx_i = y_i (w_i - sum_j y_j w_j), log_softmax
// dx_i = w_i - exp(y_i) sum_j w_j, along dim.
std::vector<double> backward_reference(const std::vector<double>& w, const std::vector<double>& y,
                                       const Shape& shape, int64_t dim, bool log) {
  std::vector<double> dx(y.size());
  for_each_row(shape, dim, [&](const auto& at, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += log ? w[at(i)] : y[at(i)] * w[at(i)];
    for (int64_t i = 0; i < n; ++i)
      dx[at(i)] = log ? w[at(i)] - std::exp(y[at(i)]) * s : y[at(i)] * (w[at(i)] - s);
  });
  return dx;
}

// Note [Softmax backward references]
// The backward sees y, not x. In bf16/f16 that y is rounded, and dx_i = y_i (w_i - s)
// inherits y's rounding through the cancellation in w_i - s: an error of a few ulps of
// max |dx| that no backward given this y can avoid (PyTorch's, which saves the same
// output, has it too). So the backward is checked against the fp64 product on the y it is
// given, within its dtype's tolerance, in every dtype; finite differences of the fp64
// forward at x check that product itself, in f32, where y's rounding is below the bound.
TEST_P(SoftmaxTest, BackwardMatchesFp64OnItsInputs) {
  const SoftmaxCase& c = GetParam();
  const Tensor x = random_tensor(c.shape, 2, c.dtype, -3, 3);
  const Tensor w = random_tensor(c.shape, 3, c.dtype);
  const Tensor y = c.log ? ops::log_softmax(x, c.dim) : ops::softmax(x, c.dim);
  const Tensor dx =
      c.log ? ops::log_softmax_backward(w, y, c.dim) : ops::softmax_backward(w, y, c.dim);
  EXPECT_EQ(dx.dtype(), c.dtype);
  const std::vector<double> wv = to_f64(w);
  EXPECT_TRUE(
      close_for(c.dtype, to_f64(dx), backward_reference(wv, to_f64(y), c.shape, c.dim, c.log)));
  if (c.dtype != DType::f32) return;
  auto loss = [&](const std::vector<double>& xv) {
    const std::vector<double> yv = reference(xv, c.shape, c.dim, c.log);
    double s = 0;
    for (size_t i = 0; i < yv.size(); ++i) s += wv[i] * yv[i];
    return s;
  };
  EXPECT_TRUE(close_for(c.dtype, to_f64(dx), finite_diff(loss, to_f64(x))));
}

INSTANTIATE_TEST_SUITE_P(Softmax, SoftmaxTest, ::testing::ValuesIn(softmax_cases()),
                         [](const auto& info) {
                           const SoftmaxCase& c = info.param;
                           return std::string(c.log ? "log_" : "") + c.name + "_" +
                                  std::string(dtype_name(c.dtype));
                         });

// Throws fitgrad::Error whose message starts with `prefix`.

TEST(SoftmaxErrors, BadDimsDtypesAndShapes) {
  const Tensor x = random_tensor({2, 3}, 4);
  expect_error([&] { ops::softmax(x, 2); }, "[softmax]");
  expect_error([&] { ops::log_softmax(x, -3); }, "[log_softmax]");
  expect_error([&] { ops::softmax(Tensor::zeros({2, 3}, DType::i32), 1); }, "[softmax]");
  expect_error([&] { ops::softmax(Tensor::zeros({}), 0); }, "[softmax]");
  expect_error(
      [&] {
        ops::softmax_backward(random_tensor({3, 2}, 5), x, 1);
      },
      "[softmax_backward]");
  expect_error(
      [&] {
        ops::log_softmax_backward(x, Tensor::zeros({2, 3}, DType::i64), 1);
      },
      "[log_softmax_backward]");
  expect_error([&] { ops::softmax_backward(x.to(Device::meta()), x, 1); }, "[softmax_backward]");
}

TEST(SoftmaxMeta, AllocatesOutputsOnly) {
  const Tensor x = Tensor::empty({2, 5, 3}, DType::bf16, Device::meta());
  for (const Tensor& y : {ops::softmax(x, 1), ops::log_softmax(x, -1),
                          ops::softmax_backward(x, x, 0), ops::log_softmax_backward(x, x, 2)}) {
    EXPECT_EQ(y.shape(), x.shape());
    EXPECT_EQ(y.dtype(), DType::bf16);
    EXPECT_EQ(y.device(), Device::meta());
  }
}

TEST(SoftmaxStability, LargeLogitsDoNotOverflow) {
  const Tensor x = Tensor::from_vector(std::vector<double>{1000, 999, -1000}, {3}, DType::f32);
  const std::vector<double> want = reference({1000, 999, -1000}, {3}, 0, false);
  EXPECT_TRUE(all_close(to_f64(ops::softmax(x, 0)), want, 1e-6, 1e-7));
  const std::vector<double> want_log = reference({1000, 999, -1000}, {3}, 0, true);
  EXPECT_TRUE(all_close(to_f64(ops::log_softmax(x, 0)), want_log, 1e-6, 1e-5));
}

// Note [Causal softmax]: bit for bit softmax(x + mask) with the additive 0 / -inf mask that
// attention used to build, for T = S and for T < S (the end-aligned diagonal), each dtype;
// and the backward through it is softmax_backward's, zero where masked.
TEST(CausalSoftmax, EqualsTheAdditiveMaskBitForBit) {
  for (DType dtype : {DType::f32, DType::bf16, DType::f16})
    for (auto [t, s] : {std::pair<int64_t, int64_t>{7, 7}, {3, 8}, {1, 5}}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " T " + std::to_string(t) + " S " +
                   std::to_string(s));
      const Tensor x = random_tensor({2, 3, t, s}, 40 + uint64_t(t), dtype, -4, 4);
      std::vector<double> mask(size_t(t * s), 0.0);
      for (int64_t i = 0; i < t; ++i)
        for (int64_t j = i + 1 + s - t; j < s; ++j) mask[size_t(i * s + j)] = -INFINITY;
      const Tensor masked = ops::add(x, Tensor::from_vector(mask, {t, s}, dtype));  // (2, 3, T, S)
      const Tensor want = ops::softmax(masked, -1);
      const Tensor got = ops::causal_softmax(x);
      EXPECT_EQ(to_f64(got), to_f64(want));
      for (int64_t i = 0; i < t; ++i)
        for (int64_t j = i + 1 + s - t; j < s; ++j) EXPECT_EQ(got.at({1, 2, i, j}), 0.0);
    }
}

TEST(CausalSoftmax, RejectsMoreQueriesThanKeys) {
  expect_error([] { ops::causal_softmax(Tensor::zeros({4, 3})); }, "[softmax]", "T <= S");
  expect_error([] { ops::causal_softmax(Tensor::zeros({4})); }, "[softmax]", "(..., T, S)");
}

}  // namespace
}  // namespace fitgrad::testing
