// The int8 Linear (nn/int8_linear.h): its forward and backward are the dense Linear's over
// its dequantized weight (torch and GPT-2 Conv1D layouts), dW reaching the u8 codes as a
// floating gradient in the compute dtype (f32, or bf16 under autocast); the codes, scales and
// zeros are parameters in the ledger's quantized_weight category, and a forward with its
// backward leaves no dequantized weight behind; a group size that does not divide a weight is
// an error naming the layer and the flag.
#include "nn/int8_linear.h"

#include <gtest/gtest.h>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "tensor/memory/caching_allocator.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::nn {
namespace {

using testing::to_f64;

std::unique_ptr<Int8Linear> make_layer(int64_t in, int64_t out, LinearLayout layout,
                                       int64_t group = 64) {
  BuildOptions o;
  o.seed = 5;
  BuildContext ctx(o);
  LinearOptions lo;
  lo.layout = layout;
  lo.init_std = 0.1;
  return std::make_unique<Int8Linear>(LinearSpec{"m.proj", "proj", in, out, lo}, group, ctx);
}

class Int8LinearLayouts : public ::testing::TestWithParam<LinearLayout> {};

TEST_P(Int8LinearLayouts, ForwardAndBackwardAreTheDenseLinearsOfTheDequantizedWeight) {
  const LinearLayout layout = GetParam();
  const auto layer = make_layer(64, 48, layout);
  const auto params = layer->named_parameters();
  ASSERT_EQ(params.size(), 4u);  // weight, weight_scales, weight_zeros, bias
  const Tensor codes = layer->quantized().codes;
  Tensor bias = layer->named_parameters()[3].second;
  EXPECT_TRUE(autograd::requires_grad(codes));
  EXPECT_FALSE(autograd::requires_grad(layer->quantized().scales));
  bias.copy_(testing::random_tensor({48}, 9));

  Tensor x = testing::random_tensor({2, 3, 64}, 6);
  autograd::set_requires_grad(x);
  autograd::backward(autograd::sum(layer->forward(x), {0, 1, 2}));
  const Tensor dx = autograd::grad(x), dw = autograd::grad(codes), db = autograd::grad(bias);

  Tensor w = layer->dequantized(DType::f32);  // the model's layout
  autograd::set_requires_grad(w);
  Tensor x2 = x.clone(), b2 = bias.clone();
  autograd::set_requires_grad(x2);
  autograd::set_requires_grad(b2);
  const Tensor y2 = layout == LinearLayout::torch ? autograd::linear(x2, w, b2)
                                                  : autograd::add(autograd::matmul(x2, w), b2);
  autograd::backward(autograd::sum(y2, {0, 1, 2}));
  ASSERT_TRUE(dw.defined());
  EXPECT_EQ(dw.dtype(), DType::f32);
  EXPECT_EQ(dw.shape(), codes.shape());
  EXPECT_TRUE(testing::all_close(to_f64(dx), to_f64(autograd::grad(x2)), 1e-6, 1e-6));
  EXPECT_TRUE(testing::all_close(to_f64(dw), to_f64(autograd::grad(w)), 1e-6, 1e-6));
  EXPECT_TRUE(testing::all_close(to_f64(db), to_f64(autograd::grad(b2)), 1e-6, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(Layouts, Int8LinearLayouts,
                         ::testing::Values(LinearLayout::torch, LinearLayout::conv1d));

TEST(Int8Linear, UnderAutocastTheWeightGradientIsBf16) {
  const auto layer = make_layer(64, 32, LinearLayout::torch);
  const autograd::AutocastGuard autocast(DType::bf16);
  const Tensor x = testing::random_tensor({5, 64}, 7);
  const Tensor y = layer->forward(x);
  EXPECT_EQ(y.dtype(), DType::bf16);
  autograd::backward(autograd::sum(autograd::cast(y, DType::f32), {0, 1}));
  EXPECT_EQ(autograd::grad(layer->quantized().codes).dtype(), DType::bf16);
}

TEST(Int8Linear, TheStateIsQuantizedWeightAndNoDequantizedCopySurvives) {
  CachingAllocator& alloc = allocator_for(Device::cpu());
  const int64_t before = alloc.by_category()[size_t(Category::quantized_weight)].current;
  const auto layer = make_layer(256, 128, LinearLayout::torch, 256);
  const int64_t held = alloc.by_category()[size_t(Category::quantized_weight)].current - before;
  // 32 KiB of codes, 128 scales and 128 zeros, each a block rounded up to 512 B.
  EXPECT_EQ(held, 256 * 128 + 512 + 512);
  EXPECT_EQ(layer->quantized().nbytes(), 256 * 128 + 128 * 4 + 128);
  const int64_t temporary = alloc.by_category()[size_t(Category::temporary)].current;
  Tensor x = testing::random_tensor({4, 256}, 8);
  autograd::set_requires_grad(x);
  autograd::backward(autograd::sum(layer->forward(x), {0, 1}));
  EXPECT_EQ(alloc.by_category()[size_t(Category::temporary)].current, temporary);
}

TEST(Int8Linear, AGroupSizeThatDoesNotDivideNamesTheLayerAndTheFlag) {
  try {
    make_layer(64, 48, LinearLayout::torch, 100);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[m.proj] --weight_group_size 100"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace fitgrad::nn
