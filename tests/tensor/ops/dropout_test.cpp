// dropout: forward against an fp64 reference that draws its own keep decisions from
// philox_uniform (one table row per shape, p and dtype), backward against finite
// differences of that reference; then the properties of Note [Dropout keeps no mask]: the
// same state gives the same mask, restoring the generator reproduces the output bitwise,
// backward's mask is forward's, the kept fraction is 1 - p within a binomial bound, and
// p = 0, errors and meta.
#include "tensor/ops/dropout.h"

#include "tensor/random/philox.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::testing {
namespace {

struct DropoutCase {
  const char* name;
  Shape shape;
  double p;
  DType dtype;
};

std::vector<DropoutCase> dropout_cases() {
  struct Base {
    const char* name;
    Shape shape;
    double p;
  };
  const Base bases[] = {{"matrix", {6, 7}, 0.1}, {"half", {3, 2, 5}, 0.5}, {"odd", {13}, 0.9}};
  std::vector<DropoutCase> out;
  for (const Base& b : bases)
    for (DType dt : {DType::f32, DType::bf16, DType::f16})
      out.push_back({b.name, b.shape, b.p, dt});
  return out;
}

// fp64 inverted dropout with the keep decisions of `state` (Note [Philox streams]).
std::vector<double> reference(const std::vector<double>& x, double p, const RngState& state) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    y[i] = philox_uniform(state.seed, state.offset + i) >= p ? x[i] / (1 - p) : 0.0;
  return y;
}

class DropoutTest : public ::testing::TestWithParam<DropoutCase> {};

TEST_P(DropoutTest, ForwardMatchesFp64Reference) {
  const DropoutCase& c = GetParam();
  Generator gen(70);
  gen.reserve(3);  // an offset that is not a multiple of 4
  const Tensor x = random_tensor(c.shape, 71, c.dtype);
  const ops::DropoutOut out = ops::dropout(x, c.p, gen);
  EXPECT_EQ(out.state, (RngState{70, 3}));
  EXPECT_EQ(gen.state().offset, 3 + uint64_t(x.numel()));
  EXPECT_EQ(out.y.shape(), c.shape);
  EXPECT_EQ(out.y.dtype(), c.dtype);
  EXPECT_TRUE(close_for(c.dtype, to_f64(out.y), reference(to_f64(x), c.p, out.state)));
}

TEST_P(DropoutTest, BackwardMatchesFiniteDifferences) {
  const DropoutCase& c = GetParam();
  Generator gen(72);
  const Tensor x = random_tensor(c.shape, 73, c.dtype);
  const Tensor dy = random_tensor(c.shape, 74, c.dtype);
  const RngState state = ops::dropout(x, c.p, gen).state;
  const Tensor dx = ops::dropout_backward(dy, c.p, state);
  EXPECT_EQ(dx.dtype(), c.dtype);
  const std::vector<double> dyv = to_f64(dy);
  auto loss = [&](const std::vector<double>& xv) {
    const std::vector<double> y = reference(xv, c.p, state);
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += dyv[i] * y[i];
    return s;
  };
  EXPECT_TRUE(close_for(c.dtype, to_f64(dx), finite_diff(loss, to_f64(x))));
}

INSTANTIATE_TEST_SUITE_P(Dropout, DropoutTest, ::testing::ValuesIn(dropout_cases()),
                         [](const auto& info) {
                           return std::string(info.param.name) + "_" +
                                  std::string(dtype_name(info.param.dtype));
                         });

TEST(DropoutState, SameStateSameMaskAndRestoreReproducesBitwise) {
  Generator gen(80);
  const Tensor x = random_tensor({64, 33}, 81, DType::bf16, 0.5, 1.5);  // no zeros
  const RngState saved = gen.state();
  const ops::DropoutOut a = ops::dropout(x, 0.3, gen);
  const ops::DropoutOut b = ops::dropout(x, 0.3, gen);
  EXPECT_NE(a.y.to_vector<float>(), b.y.to_vector<float>());  // the stream moved on
  EXPECT_EQ(b.state.offset, a.state.offset + uint64_t(x.numel()));
  gen.set_state(saved);
  const ops::DropoutOut again = ops::dropout(x, 0.3, gen);
  EXPECT_EQ(again.state, a.state);
  EXPECT_EQ(again.y.to_vector<float>(), a.y.to_vector<float>());
  // Backward's mask and scale are forward's: dropout_backward(x) == dropout(x).
  EXPECT_EQ(ops::dropout_backward(x, 0.3, a.state).to_vector<float>(), a.y.to_vector<float>());
  const std::vector<float> ones =
      ops::dropout_backward(Tensor::full({64, 33}, 1.0), 0.3, a.state).to_vector<float>();
  const std::vector<float> y = a.y.to_vector<float>();
  for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(ones[i] != 0, y[i] != 0) << i;
}

TEST(DropoutState, KeptFractionIsWithinABinomialBound) {
  Generator gen(82);
  const int64_t n = 1 << 17;
  for (double p : {0.1, 0.5, 0.8}) {
    const std::vector<float> y = ops::dropout(Tensor::full({n}, 1.0), p, gen).y.to_vector<float>();
    int64_t kept = 0;
    for (float v : y) {
      if (v == 0) continue;
      ++kept;
      EXPECT_FLOAT_EQ(v, float(1 / (1 - p)));
    }
    const double sigma = std::sqrt(double(n) * p * (1 - p));
    EXPECT_NEAR(double(kept), double(n) * (1 - p), 5 * sigma) << "p = " << p;
  }
}

TEST(DropoutState, PZeroIsTheIdentity) {
  Generator gen(83);
  const Tensor x = random_tensor({4, 5}, 84);
  const ops::DropoutOut out = ops::dropout(x, 0.0, gen);
  EXPECT_TRUE(out.y.same(x));
  EXPECT_EQ(gen.state().offset, 0u);
  EXPECT_TRUE(ops::dropout_backward(x, 0.0, out.state).same(x));
}

// Throws fitgrad::Error whose message starts with `prefix`.

TEST(DropoutErrors, BadProbabilitiesAndDtypes) {
  const Tensor x = random_tensor({3}, 85);
  expect_error([&] { ops::dropout(x, 1.0); }, "[dropout]");
  expect_error([&] { ops::dropout(x, -0.1); }, "[dropout]");
  expect_error([&] { ops::dropout(Tensor::zeros({3}, DType::i64), 0.5); }, "[dropout]");
  expect_error([&] { ops::dropout_backward(x, 1.5, RngState{}); }, "[dropout_backward]");
  expect_error([&] { ops::dropout_backward(Tensor::zeros({3}, DType::u8), 0.5, RngState{}); },
               "[dropout_backward]");
}

TEST(DropoutMeta, AllocatesAndAdvancesTheGenerator) {
  Generator gen(86);
  const Tensor x = Tensor::empty({4, 8}, DType::f16, Device::meta());
  const ops::DropoutOut out = ops::dropout(x, 0.2, gen);
  EXPECT_EQ(out.y.shape(), x.shape());
  EXPECT_EQ(out.y.dtype(), DType::f16);
  EXPECT_EQ(out.y.device(), Device::meta());
  EXPECT_EQ(gen.state().offset, 32u);  // a dry run leaves the generator where a real run would
  const Tensor dx = ops::dropout_backward(x, 0.2, out.state);
  EXPECT_EQ(dx.device(), Device::meta());
  EXPECT_EQ(dx.shape(), x.shape());
}

}  // namespace
}  // namespace fitgrad::testing
