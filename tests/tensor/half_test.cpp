// Exhaustive tests of the f16 and bf16 conversions in tensor/half.h and of the correctly
// rounded integer -> half conversions in tensor/convert.h. References are
// independent of the code under test: tests/tensor/f16_reference.h for f16 (GCC's
// _Float16 where the compiler has it), and values computed in double from the sign,
// exponent and mantissa fields for bf16.
#include "tensor/half.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "tensor/convert.h"
#include "tests/tensor/f16_reference.h"

namespace fitgrad {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

float f16_reference(uint16_t bits) { return float(test::f16_decode_reference(bits)); }
using test::f16_encode_reference;

// bf16: 1 sign bit, 8 exponent bits (bias 127), 7 mantissa bits.
double bf16_reference(uint16_t bits) {
  const int sign = bits >> 15;
  const int exp = (bits >> 7) & 0xFF;
  const int mant = bits & 0x7F;
  double v;
  if (exp == 0xFF)
    v = mant == 0 ? std::numeric_limits<double>::infinity()
                  : std::numeric_limits<double>::quiet_NaN();
  else if (exp == 0)
    v = std::ldexp(double(mant), -126 - 7);
  else
    v = std::ldexp(double(128 + mant), exp - 127 - 7);
  return sign ? -v : v;
}

bool is_nan16(uint16_t bits, int exp_mask, int mant_mask) {
  return (bits & exp_mask) == exp_mask && (bits & mant_mask) != 0;
}
bool f16_is_nan(uint16_t bits) { return is_nan16(bits, 0x7C00, 0x03FF); }
bool bf16_is_nan(uint16_t bits) { return is_nan16(bits, 0x7F80, 0x007F); }

// The same float bit for bit, or both NaN.
::testing::AssertionResult same_float(float got, double want) {
  if (std::isnan(want) ? std::isnan(got)
                       : std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(float(want)))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << ", want " << want;
}

TEST(HalfTest, F16DecodeMatchesFloat16ForAllPatterns) {
  for (uint32_t b = 0; b < 0x10000; ++b)
    ASSERT_TRUE(same_float(f16_bits_to_f32(uint16_t(b)), f16_reference(uint16_t(b))))
        << "bits 0x" << std::hex << b;
}

TEST(HalfTest, Bf16DecodeMatchesFieldReferenceForAllPatterns) {
  for (uint32_t b = 0; b < 0x10000; ++b)
    ASSERT_TRUE(same_float(bf16_bits_to_f32(uint16_t(b)), bf16_reference(uint16_t(b))))
        << "bits 0x" << std::hex << b;
}

TEST(HalfTest, EncodeOfDecodeIsIdentityAndNaNsStayNaN) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t bits = uint16_t(b);
    const uint16_t f16 = f32_to_f16_bits(f16_bits_to_f32(bits));
    const uint16_t bf16 = f32_to_bf16_bits(bf16_bits_to_f32(bits));
    if (f16_is_nan(bits))
      ASSERT_TRUE(f16_is_nan(f16) && (f16 & 0x8000) == (bits & 0x8000)) << std::hex << b;
    else
      ASSERT_EQ(f16, bits) << std::hex << b;
    if (bf16_is_nan(bits))
      ASSERT_TRUE(bf16_is_nan(bf16) && (bf16 & 0x8000) == (bits & 0x8000)) << std::hex << b;
    else
      ASSERT_EQ(bf16, bits) << std::hex << b;
  }
}

struct Format {
  const char* name;
  uint16_t max_finite;  // positive bit pattern
  float (*decode)(uint16_t);
  uint16_t (*encode)(float);
  bool has_float16_reference;
};

const Format kFormats[] = {
    {"f16", 0x7BFF, f16_bits_to_f32, f32_to_f16_bits, true},
    {"bf16", 0x7F7F, bf16_bits_to_f32, f32_to_bf16_bits, false},
};

// For every pair of adjacent finite values lo < hi of one sign (zero and the smallest
// subnormal included), the exact midpoint rounds to the one with an even mantissa, and
// the floats just beside the midpoint round to the nearer neighbour.
TEST(HalfTest, MidpointsRoundToNearestEven) {
  for (const Format& f : kFormats) {
    SCOPED_TRACE(f.name);
    for (uint16_t sign : {uint16_t(0), uint16_t(0x8000)}) {
      for (uint16_t b = 0; b < f.max_finite; ++b) {
        const uint16_t near = sign | b;       // closer to zero
        const uint16_t far = sign | (b + 1);  // farther from zero
        const double mid_d = (double(f.decode(near)) + double(f.decode(far))) / 2;
        const float mid = float(mid_d);
        ASSERT_EQ(double(mid), mid_d) << "midpoint not representable in float";
        const float toward_far = std::nextafter(mid, sign ? -kInf : kInf);
        const float toward_near = std::nextafter(mid, sign ? kInf : -kInf);
        const uint16_t even = (near & 1) == 0 ? near : far;
        ASSERT_EQ(f.encode(mid), even) << std::hex << near;
        ASSERT_EQ(f.encode(toward_far), far) << std::hex << near;
        ASSERT_EQ(f.encode(toward_near), near) << std::hex << near;
        if (f.has_float16_reference) {
          ASSERT_EQ(f16_encode_reference(mid), even);
          ASSERT_EQ(f16_encode_reference(toward_far), far);
          ASSERT_EQ(f16_encode_reference(toward_near), near);
        }
      }
    }
  }
}

TEST(HalfTest, OverflowThresholdGoesToInfinity) {
  for (const Format& f : kFormats) {
    SCOPED_TRACE(f.name);
    const uint16_t inf = f.max_finite + 1;
    // The largest finite value has an odd mantissa, so the midpoint to the next binade's
    // first value (which would be 2^(emax+1)) ties to infinity.
    const double max = f.decode(f.max_finite);
    const double ulp = max - double(f.decode(f.max_finite - 1));
    const float threshold = float(max + ulp / 2);
    for (uint16_t sign : {uint16_t(0), uint16_t(0x8000)}) {
      const float s = sign ? -1.0f : 1.0f;
      EXPECT_EQ(f.encode(s * threshold), sign | inf);
      EXPECT_EQ(f.encode(std::nextafter(s * threshold, 0.0f)), sign | f.max_finite);
      EXPECT_EQ(f.encode(s * std::numeric_limits<float>::max()), sign | inf);
      EXPECT_EQ(f.encode(s * kInf), sign | inf);
    }
  }
  EXPECT_EQ(f32_to_f16_bits(65519.996f), 0x7BFF);
  EXPECT_EQ(f32_to_f16_bits(65520.0f), 0x7C00);
}

TEST(HalfTest, SignedZerosAndSubnormals) {
  for (const Format& f : kFormats) {
    SCOPED_TRACE(f.name);
    EXPECT_EQ(f.encode(0.0f), 0x0000);
    EXPECT_EQ(f.encode(-0.0f), 0x8000);
    EXPECT_EQ(f.encode(std::numeric_limits<float>::denorm_min()), 0x0000);
    EXPECT_EQ(f.encode(-std::numeric_limits<float>::denorm_min()), 0x8000);
    EXPECT_TRUE(std::signbit(f.decode(0x8000)));
    EXPECT_EQ(f.decode(0x8000), 0.0f);
  }
  // f16 subnormals are multiples of 2^-24; bf16 subnormals of 2^-133.
  // Far below f16's smallest subnormal: a zero of the right sign.
  EXPECT_EQ(f32_to_f16_bits(1e-30f), 0x0000);
  EXPECT_EQ(f32_to_f16_bits(-1e-30f), 0x8000);
  EXPECT_EQ(f16_bits_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_bits_to_f32(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(3.0f, -24)), 0x0003);
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -25)), 0x0000);     // tie to even (zero)
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(3.0f, -25)), 0x0002);     // 1.5 ulp: tie to even (2)
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1023.5f, -24)), 0x0400);  // rounds into the normals
  EXPECT_EQ(bf16_bits_to_f32(0x0001), std::ldexp(1.0f, -133));
  EXPECT_EQ(f32_to_bf16_bits(std::ldexp(1.0f, -134)), 0x0000);
}

// Every 4099th float bit pattern (a million samples across all exponents and NaNs)
// against the reference float -> f16.
TEST(HalfTest, F16EncodeMatchesFloat16OnSampledFloats) {
  for (uint64_t x = 0; x <= 0xFFFFFFFFu; x += 4099) {
    const float f = std::bit_cast<float>(uint32_t(x));
    const uint16_t got = f32_to_f16_bits(f);
    if (std::isnan(f))
      ASSERT_TRUE(f16_is_nan(got)) << std::hex << x;
    else
      ASSERT_EQ(got, f16_encode_reference(f)) << std::hex << x;
  }
}

// The correctly rounded bf16/f16 value of an integer, computed in double: the two
// neighbours in the format's grid around x, then the nearer (ties to even mantissa).
double round_int_reference(int64_t x, int mantissa_bits) {
  if (x == 0) return 0.0;
  const long double v = std::fabs(static_cast<long double>(x));  // exact: 64-bit mantissa
  int e;
  std::frexp(v, &e);  // v in [2^(e-1), 2^e)
  const long double ulp = std::ldexp(1.0L, e - 1 - mantissa_bits);
  const long double lo = std::floor(v / ulp) * ulp;
  const long double rem = v - lo;
  long double r = lo;
  if (rem * 2 > ulp || (rem * 2 == ulp && std::fmod(lo / ulp, 2.0L) == 1.0L)) r = lo + ulp;
  return double(x < 0 ? -r : r);
}

TEST(HalfTest, Int32ToBf16IsCorrectlyRounded) {
  // Around 2^24, 2^25 and 2^26, where int -> float -> bf16 would round twice.
  for (int64_t center : {int64_t(1) << 24, int64_t(1) << 25, int64_t(1) << 26}) {
    for (int64_t x = center - (1 << 18); x <= center + (1 << 20); ++x) {
      for (int64_t v : {x, -x}) {
        const BFloat16 got = convert<BFloat16>(int32_t(v));
        ASSERT_EQ(double(float(got)), round_int_reference(v, 7)) << v;
      }
    }
  }
}

TEST(HalfTest, Int32ToF16IsCorrectlyRoundedOverItsRange) {
  for (int32_t v = -65519; v <= 65519; ++v)
    ASSERT_EQ(double(float(convert<Half>(v))), round_int_reference(v, 10)) << v;
  EXPECT_EQ(convert<Half>(int32_t(65520)).bits, 0x7C00);
  EXPECT_EQ(convert<Half>(int32_t(-65520)).bits, 0xFC00);
  EXPECT_EQ(convert<Half>(std::numeric_limits<int32_t>::max()).bits, 0x7C00);
}

// Integers just above an exact half-way point of the bf16 grid: rounding first to float
// (or, for i64, to double) would land on the midpoint and then tie the wrong way.
TEST(HalfTest, WideIntegersAboveMidpointsRoundUp) {
  const int64_t cases[] = {
      (int64_t(1) << 24) + (int64_t(1) << 16) + 1,
      (int64_t(1) << 60) + (int64_t(1) << 52) + 1,
      -((int64_t(1) << 60) + (int64_t(1) << 52) + 1),
      std::numeric_limits<int64_t>::max(),
      std::numeric_limits<int64_t>::min(),
  };
  for (int64_t x : cases)
    EXPECT_EQ(double(float(convert<BFloat16>(x))), round_int_reference(x, 7)) << x;
  // The first case spelled out: 2^24 + 2^16 + 1 lies above the midpoint of 2^24 and
  // 2^24 + 2^17, so it rounds up.
  EXPECT_EQ(float(convert<BFloat16>(int32_t((1 << 24) + (1 << 16) + 1))),
            float((1 << 24) + (1 << 17)));
  EXPECT_EQ(float(convert<BFloat16>((int64_t(1) << 60) + (int64_t(1) << 52) + 1)),
            std::ldexp(1.0f, 60) + std::ldexp(1.0f, 53));
}

}  // namespace
}  // namespace fitgrad
