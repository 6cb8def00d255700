// The autocast op table (Note [Autocast op table] in autograd/autocast_rules.h): every op has
// exactly one row; the matmul family lowers, the norms, softmax, the loss and the sums compute
// in f32 inside and return their input's dtype, binary arithmetic promotes, backward ops run
// as they are; autocast_operands casts only the floating operands of a lower op.
#include "autograd/autocast_rules.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::autograd {
namespace {

using backend::OpId;
using P = AutocastPolicy;

TEST(AutocastRules, EveryOpHasExactlyOneRow) {
  EXPECT_EQ(autocast_rules().size(), backend::kOpCount);
  for (OpId op : backend::all_ops()) {
    int rows = 0;
    for (const AutocastRule& r : autocast_rules()) rows += r.op == op ? 1 : 0;
    EXPECT_EQ(rows, 1) << backend::op_name(op);
  }
}

struct PolicyRow {
  OpId op;
  AutocastPolicy policy;
};

TEST(AutocastRules, OpsGetPyTorchsPolicies) {
  const PolicyRow rows[] = {
      {OpId::matmul, P::lower},
      {OpId::linear, P::lower},
      {OpId::flash_attention, P::lower},  // scaled_dot_product_attention
      {OpId::naive_attention, P::lower},
      {OpId::layer_norm, P::fp32_internal},
      {OpId::rms_norm, P::fp32_internal},
      {OpId::softmax, P::fp32_internal},
      {OpId::log_softmax, P::fp32_internal},
      {OpId::cross_entropy, P::fp32_internal},
      {OpId::sum, P::fp32_internal},
      {OpId::exp, P::fp32_internal},
      {OpId::add, P::promote},
      {OpId::mul, P::promote},
      {OpId::embedding, P::as_is},
      {OpId::gelu, P::as_is},
      {OpId::rope, P::as_is},
      {OpId::dropout, P::as_is},
      {OpId::adamw_update, P::as_is},
  };
  for (const PolicyRow& r : rows)
    EXPECT_STREQ(policy_name(autocast_policy(r.op)), policy_name(r.policy))
        << backend::op_name(r.op);
}

TEST(AutocastRules, BackwardOpsRunAsTheyAre) {
  int backward_ops = 0;
  for (OpId op : backend::all_ops()) {
    const std::string name = backend::op_name(op);
    if (!name.ends_with("_backward")) continue;
    ++backward_ops;
    EXPECT_EQ(autocast_policy(op), P::as_is) << name;
  }
  EXPECT_GE(backward_ops, 10);
}

TEST(AutocastRules, OnlyTheFloatingOperandsOfALowerOpAreCast) {
  const Tensor x = testing::random_tensor({2, 3}, 1);
  const Tensor ids = Tensor::from_vector<int64_t>({0, 1}, {2}, DType::i64);
  AutocastGuard guard(DType::bf16);
  const std::vector<Tensor> low = autocast_operands(OpId::matmul, {x, ids, Tensor()});
  EXPECT_EQ(low[0].dtype(), DType::bf16);
  EXPECT_EQ(low[0].to_vector<float>(), x.to(DType::bf16).to_vector<float>());
  EXPECT_TRUE(low[1].same(ids));
  EXPECT_FALSE(low[2].defined());
  for (OpId op : {OpId::softmax, OpId::layer_norm, OpId::cross_entropy, OpId::add, OpId::gelu})
    EXPECT_TRUE(autocast_operands(op, {x})[0].same(x)) << backend::op_name(op);
}

// fp32_internal: a bf16 softmax is the f32 softmax of the same values, rounded once to bf16.
TEST(AutocastRules, Fp32InternalOpsReturnTheInputDtypeRoundedOnce) {
  const Tensor x = testing::random_tensor({3, 7}, 2, DType::f32, -4, 4).to(DType::bf16);
  const Tensor y = softmax(x, -1);
  ASSERT_EQ(y.dtype(), DType::bf16);
  const auto xv = x.to_vector<double>(), yv = y.to_vector<double>();
  for (int r = 0; r < 3; ++r) {
    double z = 0;
    for (int c = 0; c < 7; ++c) z += std::exp(xv[size_t(r * 7 + c)]);
    for (int c = 0; c < 7; ++c) {
      const float ref = float(std::exp(xv[size_t(r * 7 + c)]) / z);
      const double rounded =
          Tensor::from_vector<float>({ref}, {1}).to(DType::bf16).to_vector<double>()[0];
      // f32 arithmetic inside may land the f32 value on the other side of a bf16 tie.
      EXPECT_NEAR(yv[size_t(r * 7 + c)], rounded, std::abs(rounded) / 128) << r << "," << c;
    }
  }
}

}  // namespace
}  // namespace fitgrad::autograd
