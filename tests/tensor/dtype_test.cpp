// Dtype conversions through Tensor: round trips across every pair of the seven dtypes
// for values both can hold, the saturating/wrapping rules of tensor/convert.h, correct
// rounding of doubles to half types, and from_vector/to_vector.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tensor/tensor.h"

namespace fitgrad {
namespace {

using ::testing::HasSubstr;

// Whether `dtype` holds v exactly, from the dtype's definition: integer ranges, and for
// the float types the candidate values (integers up to 255, a few short binary fractions)
// all fit in 8 significant bits and small exponents.
bool holds(DType dtype, double v) {
  const bool integral = v == std::floor(v);
  switch (dtype) {
    case DType::f32:
    case DType::f16:
    case DType::bf16: return true;
    case DType::i32:
    case DType::i64: return integral;
    case DType::u8: return integral && v >= 0 && v <= 255;
    case DType::i8: return integral && v >= -128 && v <= 127;
  }
  return false;
}

std::vector<double> candidates() {
  std::vector<double> v;
  for (int i = -128; i <= 255; ++i) v.push_back(i);
  for (double f : {0.5, -0.5, 1.25, -2.75, 0.0078125, 100.5, -127.5}) v.push_back(f);
  return v;
}

TEST(DTypeTest, RoundTripsAcrossAllPairs) {
  for (DType a : kAllDTypes) {
    for (DType b : kAllDTypes) {
      SCOPED_TRACE(fmt::format("{} -> {}", dtype_name(a), dtype_name(b)));
      std::vector<double> values;
      for (double v : candidates())
        if (holds(a, v) && holds(b, v)) values.push_back(v);
      const Tensor ta = Tensor::from_vector(values, {int64_t(values.size())}, a);
      ASSERT_EQ(ta.dtype(), a);
      const Tensor tb = ta.to(b);
      ASSERT_EQ(tb.dtype(), b);
      EXPECT_EQ(tb.to_vector<double>(), values);
      EXPECT_EQ(tb.to(a).to_vector<double>(), values);
      // A strided source converts the same way.
      const Tensor strided = Tensor::from_vector(values, {1, int64_t(values.size())}, a)
                                 .expand({2, int64_t(values.size())})
                                 .transpose(0, 1);
      const std::vector<double> got = strided.to(b).to_vector<double>();
      ASSERT_EQ(got.size(), 2 * values.size());
      for (size_t i = 0; i < values.size(); ++i) {
        EXPECT_EQ(got[2 * i], values[i]);
        EXPECT_EQ(got[2 * i + 1], values[i]);
      }
    }
  }
}

struct ConversionCase {
  DType from;
  double value;
  DType to;
  double want;
};

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Expected values from the rules of Note [Float to integer saturation] and IEEE rounding.
const ConversionCase kConversionCases[] = {
    // float -> integer: truncate toward zero, NaN -> 0, saturate.
    {DType::f32, 2.75, DType::i32, 2},
    {DType::f32, -2.75, DType::i32, -2},
    {DType::f32, -0.5, DType::u8, 0},
    {DType::f32, kNaN, DType::i32, 0},
    {DType::f16, kNaN, DType::i8, 0},
    {DType::f32, 1e10, DType::i32, 2147483647},
    {DType::f32, -1e10, DType::i32, -2147483648.0},
    {DType::f32, 300, DType::u8, 255},
    {DType::f32, -5, DType::u8, 0},
    {DType::f32, 200, DType::i8, 127},
    {DType::f32, -200, DType::i8, -128},
    {DType::bf16, kInf, DType::i64, 9223372036854775807.0},
    {DType::f16, -kInf, DType::i64, -9223372036854775808.0},
    {DType::f16, 65504, DType::i32, 65504},
    // integer -> integer wraps modulo 2^bits.
    {DType::i32, 300, DType::u8, 44},
    {DType::i32, -1, DType::u8, 255},
    {DType::i64, 129, DType::i8, -127},
    {DType::u8, 200, DType::i8, -56},
    // to half types: round to nearest even, overflow to inf.
    {DType::f32, 1 + 1.0 / 256, DType::bf16, 1},              // tie -> even
    {DType::f32, 1 + 3.0 / 256, DType::bf16, 1 + 4.0 / 256},  // tie -> even (up)
    {DType::f32, 1 + 1.0 / 2048, DType::f16, 1},              // tie -> even
    {DType::f32, 1e6, DType::f16, kInf},
    {DType::i32, 70000, DType::f16, kInf},
    {DType::i32, 65519, DType::f16, 65504},
    {DType::i32, 16777217, DType::f32, 16777216},  // RNE, tie -> even
    {DType::f16, 0.0009765625, DType::bf16, 0.0009765625},
};

TEST(DTypeTest, ConversionRules) {
  for (const ConversionCase& c : kConversionCases) {
    SCOPED_TRACE(fmt::format("{} {} -> {}", dtype_name(c.from), c.value, dtype_name(c.to)));
    const Tensor t = Tensor::full({3}, c.value, c.from).to(c.to);
    for (double got : t.to_vector<double>()) {
      if (std::isnan(c.want))
        EXPECT_TRUE(std::isnan(got));
      else
        EXPECT_EQ(got, c.want);
    }
  }
}

// A double above an f16 midpoint by less than float's precision: rounding it to float
// first would reach the midpoint exactly and then tie down to even. Doubles convert with
// round-to-odd (Note [Integer to half rounding]), so the result is the upper neighbour.
TEST(DTypeTest, DoublesRoundOnceToHalfTypes) {
  const double above = 1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  const double below = 1 + std::ldexp(1.0, -11) - std::ldexp(1.0, -40);
  EXPECT_EQ(Tensor::from_vector<double>({above, below}, {2}, DType::f16).to_vector<double>(),
            (std::vector<double>{1 + std::ldexp(1.0, -10), 1}));
  const double bf_above = 1 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  EXPECT_EQ(
      Tensor::from_vector<double>({bf_above, -bf_above}, {2}, DType::bf16).to_vector<double>(),
      (std::vector<double>{1 + std::ldexp(1.0, -7), -1 - std::ldexp(1.0, -7)}));
  // full() takes a double too.
  EXPECT_EQ(Tensor::full({}, above, DType::f16).item(), 1 + std::ldexp(1.0, -10));
}

TEST(DTypeTest, FromVectorToVectorKeepRowMajorOrder) {
  const std::vector<int32_t> v = {1, 2, 3, 4, 5, 6};
  const Tensor t = Tensor::from_vector(v, {2, 3});
  EXPECT_EQ(t.dtype(), DType::i32);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.at({1, 0}), 4);
  EXPECT_EQ(t.to_vector<int32_t>(), v);
  EXPECT_EQ(t.transpose(0, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  // The storage holds the converted values.
  const Tensor h = Tensor::from_vector(std::vector<float>{1.5f, -2.0f}, {2}, DType::bf16);
  EXPECT_EQ(h.data<BFloat16>()[0].bits, 0x3FC0);
  EXPECT_EQ(h.data<BFloat16>()[1].bits, 0xC000);
  // to_vector into a half type, and into an integer type with saturation.
  EXPECT_EQ(h.to_vector<Half>()[0].bits, 0x3E00);
  EXPECT_EQ(Tensor::from_vector<float>({1e20f, -3.9f}, {2}).to_vector<int8_t>(),
            (std::vector<int8_t>{127, -3}));
}

TEST(DTypeTest, FromVectorChecksTheCount) {
  try {
    Tensor::from_vector<float>({1, 2, 3}, {2, 2});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("[from_vector]"));
    EXPECT_THAT(e.what(), HasSubstr("(2, 2)"));
  }
}

TEST(DTypeTest, DataChecksTheDtype) {
  const Tensor t = Tensor::zeros({2}, DType::f16);
  EXPECT_NE(t.data<Half>(), nullptr);
  try {
    t.data<float>();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("[data]"));
    EXPECT_THAT(e.what(), HasSubstr("f16"));
  }
}

TEST(DTypeTest, ElementSizesMatchStorageTypes) {
  for (DType t : kAllDTypes) {
    const Tensor x = Tensor::zeros({3, 5}, t);
    EXPECT_EQ(x.nbytes(), 15 * element_size(t));
    EXPECT_GE(x.storage()->nbytes(), x.nbytes());
  }
}

}  // namespace
}  // namespace fitgrad
