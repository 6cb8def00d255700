// The harness itself: finite differences recover known derivatives, and all_close fails
// when it should.
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::testing {
namespace {

TEST(OpHarness, FiniteDifferencesRecoverKnownDerivatives) {
  // f(x) = sum_i sin(x_i) * x_{i+1}; df/dx_i = cos(x_i) x_{i+1} + sin(x_{i-1}).
  const std::vector<double> x = {0.3, -1.2, 0.7, 2.0};
  auto f = [](const std::vector<double>& v) {
    double s = 0;
    for (size_t i = 0; i + 1 < v.size(); ++i) s += std::sin(v[i]) * v[i + 1];
    return s;
  };
  std::vector<double> want(x.size(), 0.0);
  for (size_t i = 0; i < x.size(); ++i) {
    if (i + 1 < x.size()) want[i] += std::cos(x[i]) * x[i + 1];
    if (i > 0) want[i] += std::sin(x[i - 1]);
  }
  EXPECT_TRUE(all_close(finite_diff(f, x), want, 1e-8, 1e-9));
}

TEST(OpHarness, AllCloseRejectsAndNamesTheWorstElement) {
  const auto r = all_close({1.0, 2.0, 3.5}, {1.0, 2.0, 3.0}, 1e-3, 1e-3);
  EXPECT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("worst at 2"), std::string::npos) << r.message();
  EXPECT_FALSE(all_close({NAN}, {1.0}, 1, 1));
  EXPECT_TRUE(all_close({1.0 + 1e-7}, {1.0}, 1e-6, 0));
}

}  // namespace
}  // namespace fitgrad::testing
