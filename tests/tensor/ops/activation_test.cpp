// The activation ops (tensor/ops/activation.h), table-driven over shapes, layouts and
// f32/bf16/f16: forward against fp64 formulas written here, and gelu_backward,
// silu_backward and swiglu_backward against central finite differences of sum(w * f) on
// those fp64 formulas.
#include "tensor/ops/activation.h"

#include <functional>
#include <string>

#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::testing {
namespace {

double gelu_ref(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
double silu_ref(double x) { return x / (1.0 + std::exp(-x)); }

enum class Layout { contiguous, transposed, strided };

// A random tensor in [-4, 4) of `shape`, stored as `dtype` and viewed through `layout`.
Tensor make_input(const Shape& shape, uint64_t seed, DType dtype, Layout layout) {
  Shape storage = shape;
  const size_t n = shape.size();
  if (layout == Layout::transposed && n >= 2) {
    std::swap(storage[n - 1], storage[n - 2]);
    return random_tensor(storage, seed, dtype, -4, 4).transpose(-1, -2);
  }
  if (layout == Layout::strided && n >= 1) {
    storage[n - 1] *= 2;
    return random_tensor(storage, seed, dtype, -4, 4).slice(-1, 0, storage[n - 1], 2);
  }
  return random_tensor(shape, seed, dtype, -4, 4);
}

struct Case {
  Shape shape;
  Layout first, second;  // x and dy (unary), gate and up (swiglu)
};

const Case kCases[] = {{{3, 5}, Layout::contiguous, Layout::contiguous},
                       {{2, 3, 4}, Layout::transposed, Layout::strided},
                       {{6, 4}, Layout::strided, Layout::transposed},
                       {{}, Layout::contiguous, Layout::contiguous},
                       {{0, 3}, Layout::contiguous, Layout::contiguous}};

const DType kDTypes[] = {DType::f32, DType::bf16, DType::f16};

std::string label(const char* op, const Case& c, DType dtype) {
  return std::string(op) + " " + shape_str(c.shape) + " " + std::string(dtype_name(dtype));
}

// Backward results round once from an f32 value that is itself a few roundings off: twice
// the forward's bounds (Note [Op test tolerances]), ten times in f32.
double backward_slack(DType dtype) { return dtype == DType::f32 ? 10 : 2; }

struct UnaryRow {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<Tensor(const Tensor& dy, const Tensor& x)> backward;
  double (*ref)(double);
};

const UnaryRow kUnaryRows[] = {{"gelu", ops::gelu, ops::gelu_backward, gelu_ref},
                               {"silu", ops::silu, ops::silu_backward, silu_ref}};

TEST(ElementwiseActivation, UnaryForwardAndBackwardMatchFp64) {
  uint64_t seed = 1;
  for (const UnaryRow& row : kUnaryRows)
    for (const Case& c : kCases)
      for (DType dtype : kDTypes) {
        SCOPED_TRACE(label(row.name, c, dtype));
        const Tensor x = make_input(c.shape, seed++, dtype, c.first);
        const Tensor y = row.op(x);
        ASSERT_EQ(y.shape(), c.shape);
        ASSERT_EQ(y.dtype(), dtype);
        const std::vector<double> xv = to_f64(x);
        std::vector<double> want(xv.size());
        for (size_t i = 0; i < xv.size(); ++i) want[i] = row.ref(xv[i]);
        EXPECT_TRUE(close_for(dtype, to_f64(y), want)) << "forward";

        const Tensor w = make_input(c.shape, seed++, dtype, c.second);
        const std::vector<double> wv = to_f64(w);
        const auto f = [&](const std::vector<double>& v) {
          double s = 0;
          for (size_t i = 0; i < v.size(); ++i) s += wv[i] * row.ref(v[i]);
          return s;
        };
        const Tensor dx = row.backward(w, x);
        ASSERT_EQ(dx.shape(), c.shape);
        ASSERT_EQ(dx.dtype(), dtype);
        EXPECT_TRUE(close_for(dtype, to_f64(dx), finite_diff(f, xv), backward_slack(dtype)))
            << "backward";
      }
}

TEST(ElementwiseActivation, SwigluForwardAndBackwardMatchFp64) {
  uint64_t seed = 100;
  for (const Case& c : kCases)
    for (DType dtype : kDTypes) {
      SCOPED_TRACE(label("swiglu", c, dtype));
      const Tensor gate = make_input(c.shape, seed++, dtype, c.first);
      const Tensor up = make_input(c.shape, seed++, dtype, c.second);
      const Tensor y = ops::swiglu(gate, up);
      ASSERT_EQ(y.shape(), c.shape);
      ASSERT_EQ(y.dtype(), dtype);
      const std::vector<double> gv = to_f64(gate), uv = to_f64(up);
      std::vector<double> want(gv.size());
      for (size_t i = 0; i < gv.size(); ++i) want[i] = silu_ref(gv[i]) * uv[i];
      EXPECT_TRUE(close_for(dtype, to_f64(y), want)) << "forward";

      const Tensor w = make_input(c.shape, seed++, dtype, Layout::transposed);
      const std::vector<double> wv = to_f64(w);
      const auto loss = [&](const std::vector<double>& g, const std::vector<double>& u) {
        double s = 0;
        for (size_t i = 0; i < g.size(); ++i) s += wv[i] * silu_ref(g[i]) * u[i];
        return s;
      };
      const auto [dgate, dup] = ops::swiglu_backward(w, gate, up);
      ASSERT_EQ(dgate.shape(), c.shape);
      ASSERT_EQ(dup.shape(), c.shape);
      ASSERT_EQ(dgate.dtype(), dtype);
      const double slack = backward_slack(dtype);
      EXPECT_TRUE(close_for(
          dtype, to_f64(dgate),
          finite_diff([&](const std::vector<double>& g) { return loss(g, uv); }, gv), slack))
          << "dgate";
      EXPECT_TRUE(close_for(
          dtype, to_f64(dup),
          finite_diff([&](const std::vector<double>& u) { return loss(gv, u); }, uv), slack))
          << "dup";
    }
}

// Saturated inputs give finite values: no inf * 0 inside sigmoid or tanh.
TEST(ElementwiseActivation, ExtremeInputsStayFinite) {
  const Tensor x = Tensor::from_vector(std::vector<float>{-200, -90, 0, 90, 200}, {5});
  const Tensor one = Tensor::full({5}, 1.0);
  for (const Tensor& t :
       {ops::gelu(x), ops::silu(x), ops::gelu_backward(one, x), ops::silu_backward(one, x),
        ops::swiglu(x, one), ops::swiglu_backward(one, x, one).first}) {
    for (float v : t.to_vector<float>()) EXPECT_TRUE(std::isfinite(v)) << t;
  }
  EXPECT_EQ(ops::silu(x).to_vector<float>()[4], 200.0f);
  EXPECT_EQ(ops::gelu(x).to_vector<float>()[0], 0.0f);
}

TEST(ElementwiseActivation, ErrorsNameTheOp) {
  const Tensor a = Tensor::zeros({2, 3});
  expect_error([&] { ops::swiglu(a, Tensor::zeros({3, 2})); }, "[swiglu] up has shape (3, 2)");
  expect_error(
      [&] {
        ops::swiglu(a, Tensor::zeros({2, 3}, DType::f16));
      },
      "[swiglu] dtypes differ");
  expect_error(
      [&] {
        ops::gelu_backward(a, Tensor::empty({2, 3}, DType::f32, Device::meta()));
      },
      "[gelu_backward] tensors are on cpu and meta");
  expect_error([&] { ops::silu(Tensor::zeros({2}, DType::i64)); }, "[silu] x must be");
  expect_error([&] { ops::silu_backward(a, Tensor::zeros({3})); }, "[silu_backward] x has shape");
  expect_error([&] { ops::swiglu_backward(a, a, Tensor::zeros({2})); },
               "[swiglu_backward] up has shape (2)");
}

TEST(ElementwiseActivation, MetaAllocatesWithoutComputing) {
  const Tensor x = Tensor::empty({4, 8}, DType::bf16, Device::meta());
  const Tensor y = ops::swiglu(x, x.transpose(0, 1).transpose(0, 1));
  EXPECT_EQ(y.shape(), (Shape{4, 8}));
  EXPECT_EQ(y.device(), Device::meta());
  const auto [dg, du] = ops::swiglu_backward(x, x, x);
  EXPECT_EQ(dg.shape(), (Shape{4, 8}));
  EXPECT_EQ(du.dtype(), DType::bf16);
  EXPECT_EQ(ops::gelu_backward(x, x).device(), Device::meta());
}

}  // namespace
}  // namespace fitgrad::testing
