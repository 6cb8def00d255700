// nn::Linear under autocast (Note [Autocast op table] in autograd/autocast_rules.h): in both
// layouts, under a bf16 guard, the module returns bf16 computed from bf16-rounded input,
// weight and bias, and its f32 parameters receive f32 gradients equal to the bf16
// arithmetic's; with autocast off it stays f32.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "nn/layers.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::nn {
namespace {

namespace ag = fitgrad::autograd;

double round_bf16(double v) {
  return Tensor::from_vector<float>({float(v)}, {1}).to(DType::bf16).to_vector<double>()[0];
}

class LinearAutocast : public ::testing::TestWithParam<Linear::Layout> {};

TEST_P(LinearAutocast, Bf16OutputAndF32GradientsOnF32Parameters) {
  const int64_t N = 3, in = 6, out = 5;
  BuildContext ctx(BuildOptions{.seed = 11});
  Linear fc("fc", "fc", in, out, {.bias = true, .layout = GetParam(), .init_std = 0.5}, ctx);
  const bool torch = GetParam() == Linear::Layout::torch;
  // A nonzero bias, so its cast shows in the output.
  Tensor bias = fc.bias();
  bias.copy_(testing::random_tensor({out}, 3));
  const Tensor x = testing::random_tensor({N, in}, 4);
  Tensor y;
  {
    ag::AutocastGuard guard(DType::bf16);
    y = fc.forward(x);
  }
  ASSERT_EQ(y.dtype(), DType::bf16);
  const auto xv = x.to_vector<double>(), wv = fc.weight().to_vector<double>(),
             bv = fc.bias().to_vector<double>(), yv = y.to_vector<double>();
  auto w_at = [&](int64_t j, int64_t p) { return wv[size_t(torch ? j * in + p : p * out + j)]; };
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < out; ++j) {
      double ref = 0;
      for (int64_t p = 0; p < in; ++p)
        ref += round_bf16(xv[size_t(i * in + p)]) * round_bf16(w_at(j, p));
      ref += round_bf16(bv[size_t(j)]);
      // The product (and, in the conv1d layout, the bias add) round to bf16 on the way out.
      EXPECT_NEAR(yv[size_t(i * out + j)], ref, 2.0 / 128 * std::max(1.0, std::abs(ref)));
    }

  ag::backward(ag::sum(y));
  const Tensor gw = ag::grad(fc.weight()), gb = ag::grad(fc.bias());
  ASSERT_EQ(gw.dtype(), DType::f32);
  ASSERT_EQ(gb.dtype(), DType::f32);
  EXPECT_EQ(gw.shape(), fc.weight().shape());
  // d sum(y) / dW[j, p] = sum_i x[i, p], from bf16 x, rounded to bf16 by the bf16 GEMM.
  const auto gwv = gw.to_vector<double>();
  for (int64_t j = 0; j < out; ++j)
    for (int64_t p = 0; p < in; ++p) {
      double ref = 0;
      for (int64_t i = 0; i < N; ++i) ref += round_bf16(xv[size_t(i * in + p)]);
      const double got = gwv[size_t(torch ? j * in + p : p * out + j)];
      EXPECT_NEAR(got, round_bf16(ref), std::abs(ref) / 128 + 1e-6) << j << "," << p;
    }
  for (double g : gb.to_vector<double>()) EXPECT_EQ(g, double(N));  // a sum of N ones, exact
}

TEST_P(LinearAutocast, OffStaysF32) {
  BuildContext ctx(BuildOptions{.seed = 12});
  Linear fc("fc", "fc", 4, 3, {.bias = true, .layout = GetParam()}, ctx);
  ag::NoGradGuard no_grad;  // nothing left on the thread's tape for the next test
  const Tensor y = fc.forward(testing::random_tensor({2, 4}, 5));
  EXPECT_EQ(y.dtype(), DType::f32);
}

INSTANTIATE_TEST_SUITE_P(Layouts, LinearAutocast,
                         ::testing::Values(Linear::Layout::torch, Linear::Layout::conv1d),
                         [](const auto& info) {
                           return info.param == Linear::Layout::torch ? "torch" : "conv1d";
                         });

}  // namespace
}  // namespace fitgrad::nn
