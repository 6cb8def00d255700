// Autocast (Note [Autocast] in autograd/autocast.h): under a bf16 guard a Linear computes
// from bf16-rounded operands, returns bf16, saves its input in bf16, and sends fp32
// gradients to its fp32 weight; a residual add promotes back to fp32; a checkpointed
// segment recomputes under the mode of its forward; off, the casts are identities.
#include "autograd/autocast.h"

#include <gtest/gtest.h>

#include <cmath>

#include "autograd/autocast_rules.h"
#include "autograd/checkpoint.h"
#include "autograd/functions.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "tensor/error.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::autograd {
namespace {

double round_bf16(float x) {
  return double(Tensor::from_vector<float>({x}, {1}).to(DType::bf16).to(DType::f32).item());
}

TEST(Autocast, LinearRunsOnBf16OperandsAndReturnsBf16) {
  const Tensor x = testing::random_tensor({3, 5}, 1);
  const Tensor w = testing::random_tensor({4, 5}, 2);
  set_requires_grad(w);
  Tensor y;
  {
    AutocastGuard guard(DType::bf16);
    EXPECT_EQ(autocast_dtype(), DType::bf16);
    const std::vector<Tensor> in = autocast_operands(backend::OpId::linear, {x, w});
    y = linear(in[0], in[1], Tensor());
  }
  EXPECT_EQ(autocast_dtype(), DType::f32);
  ASSERT_EQ(y.dtype(), DType::bf16);
  const auto xv = x.to_vector<float>(), wv = w.to_vector<float>(), yv = y.to_vector<float>();
  double max_rel = 0, max_shift = 0;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      double ref = 0, exact = 0;
      for (int p = 0; p < 5; ++p) {
        ref += round_bf16(xv[i * 5 + p]) * round_bf16(wv[j * 5 + p]);
        exact += double(xv[i * 5 + p]) * double(wv[j * 5 + p]);
      }
      // The product is rounded to bf16 once more on its way out of the bf16 matmul.
      max_rel = std::max(max_rel, std::abs(yv[i * 4 + j] - ref) / std::max(std::abs(ref), 1e-3));
      max_shift = std::max(max_shift, std::abs(yv[i * 4 + j] - exact));
    }
  EXPECT_LT(max_rel, 1.0 / 256);  // within one bf16 rounding of the rounded-operand product
  EXPECT_GT(max_shift, 0.0);

  backward(sum(y));
  const Tensor g = grad(w);
  ASSERT_EQ(g.dtype(), DType::f32);  // fp32 master weight, fp32 gradient
  // d sum(y) / dW[j, p] = sum_i x[i, p], in bf16 arithmetic.
  const auto gv = g.to_vector<float>();
  for (int j = 0; j < 4; ++j)
    for (int p = 0; p < 5; ++p) {
      double ref = 0;
      for (int i = 0; i < 3; ++i) ref += xv[i * 5 + p];
      EXPECT_NEAR(gv[j * 5 + p], ref, 2e-2 * std::max(1.0, std::abs(ref)));
    }
}

TEST(Autocast, OffMeansIdentity) {
  const Tensor x = testing::random_tensor({2, 2}, 3);
  EXPECT_TRUE(autocast_operand(backend::OpId::matmul, x).same(x));
  const Tensor ids = Tensor::from_vector<int64_t>({1, 2}, {2}, DType::i64);
  AutocastGuard guard(DType::bf16);
  EXPECT_EQ(autocast_operand(backend::OpId::matmul, ids).dtype(), DType::i64);  // integers stay
}

TEST(Autocast, ResidualAddPromotesAndEachOperandGetsItsOwnDtype) {
  Tensor r = testing::random_tensor({2, 3}, 4);                  // f32 residual stream
  Tensor y = testing::random_tensor({2, 3}, 5).to(DType::bf16);  // a bf16 product
  set_requires_grad(r);
  set_requires_grad(y);
  const Tensor s = add(r, y);
  ASSERT_EQ(s.dtype(), DType::f32);
  const auto rv = r.to_vector<double>(), yv = y.to_vector<double>(), sv = s.to_vector<double>();
  for (size_t i = 0; i < sv.size(); ++i) EXPECT_EQ(sv[i], double(float(rv[i] + yv[i])));
  backward(sum(mul(s, s)));
  ASSERT_EQ(grad(r).dtype(), DType::f32);
  ASSERT_EQ(grad(y).dtype(), DType::bf16);
  const auto gr = grad(r).to_vector<double>(), gy = grad(y).to_vector<double>();
  for (size_t i = 0; i < sv.size(); ++i) {
    EXPECT_NEAR(gr[i], 2 * sv[i], 1e-6);
    EXPECT_EQ(gy[i], double(Tensor::from_vector<float>({float(gr[i])}, {1})
                                .to(DType::bf16)
                                .to_vector<double>()[0]));  // the f32 gradient, rounded once
  }
}

// The checkpoint node records the mode of its forward: backward outside the guard
// recomputes in bf16 and gives the gradients of an uncheckpointed run, bit for bit.
TEST(Autocast, CheckpointRecomputesUnderTheModeOfItsForward) {
  const Tensor x = testing::random_tensor({4, 6}, 6);
  const Tensor w = testing::random_tensor({5, 6}, 7);
  auto fn = [&](const std::vector<Tensor>& in) {
    const std::vector<Tensor> c = autocast_operands(backend::OpId::linear, {in[0], w});
    return std::vector<Tensor>{linear(c[0], c[1], Tensor())};
  };
  set_requires_grad(w);
  {
    AutocastGuard guard(DType::bf16);
    backward(sum(fn({x})[0]));
  }
  const std::vector<float> plain = grad(w).to_vector<float>();
  clear_grad(w);
  Tensor y;
  {
    AutocastGuard guard(DType::bf16);
    y = checkpoint(fn, {x})[0];
  }
  ASSERT_EQ(y.dtype(), DType::bf16);
  backward(sum(y));  // no guard alive: the node restores bf16 for its recompute
  EXPECT_EQ(grad(w).to_vector<float>(), plain);
}

TEST(Autocast, RejectsANonFloatingComputeDtype) {
  EXPECT_THROW({ AutocastGuard guard(DType::i32); }, Error);
}

}  // namespace
}  // namespace fitgrad::autograd
