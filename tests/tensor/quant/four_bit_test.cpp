// NF4 and FP4 against bitsandbytes' published constants and hand-worked blocks: the code
// values, the thresholds (equal to the literals of bitsandbytes' kernel decision tree), the
// tie rule (a value on a threshold takes the lower code), the nibble order (first value
// high), a partial last block with its own absmax, a block of zeros, the allowed block
// sizes, double quantization's absmax error bound, and the storage of 4.127 bits per
// parameter with double quantization and 4.5 without.
#include "tensor/quant/four_bit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tensor/quant/dynamic_map.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::quant {
namespace {

TEST(FourBit, Nf4ThresholdsAreTheFp64MidpointsRoundedToF32) {
  // bitsandbytes csrc/kernels.cu, dQuantizeNF4's literals, ascending, as a C compiler reads
  // them.
  const float kernel[15] = {-0.8480964004993439f,   -0.6106329262256622f,  -0.4599952697753906f,
                            -0.33967943489551544f,  -0.23460740596055984f, -0.13791173323988914f,
                            -0.045525018125772476f, 0.03979014977812767f,  0.1202552504837513f,
                            0.2035212516784668f,    0.2920137718319893f,   0.3893125355243683f,
                            0.5016634166240692f,    0.6427869200706482f,   0.8614784181118011f};
  for (size_t k = 0; k < 15; ++k) {
    const double mid = (double(nf4_values()[k]) + double(nf4_values()[k + 1])) / 2;
    EXPECT_EQ(nf4_thresholds()[k], float(mid)) << k;
    // The four midpoints that are exact f32 ties: the literal's digits took the other side.
    const bool tie = k == 0 || k == 8 || k == 12 || k == 14;
    if (tie) {
      EXPECT_EQ(std::nextafter(nf4_thresholds()[k], kernel[k]), kernel[k]) << k;
      EXPECT_EQ(std::fabs(double(kernel[k]) - mid), std::fabs(double(nf4_thresholds()[k]) - mid))
          << k;
    } else {
      EXPECT_EQ(nf4_thresholds()[k], kernel[k]) << k;
    }
  }
  EXPECT_EQ(nf4_values()[0], -1.0f);
  EXPECT_EQ(nf4_values()[7], 0.0f);
  EXPECT_EQ(nf4_values()[15], 1.0f);
}

TEST(FourBit, OnAThresholdTheLowerCode) {
  for (uint8_t k = 0; k < 15; ++k) {
    const float t = nf4_thresholds()[k];
    EXPECT_EQ(nf4_code(t), k) << int(k);
    EXPECT_EQ(nf4_code(std::nextafter(t, 2.0f)), k + 1) << int(k);
    EXPECT_EQ(nf4_code(std::nextafter(t, -2.0f)), k) << int(k);
  }
  for (uint8_t c = 0; c < 16; ++c) EXPECT_EQ(nf4_code(nf4_values()[c]), c);
  for (uint8_t c = 0; c < 16; ++c) {
    if (c == 8) continue;  // -0, which codes as +0
    EXPECT_EQ(fp4_code(fp4_values()[c]), c) << int(c);
  }
  EXPECT_EQ(nf4_code(std::nanf("")), 0);
}

TEST(FourBit, AHandWorkedBlockPacksFirstValueHigh) {
  // Block size 32, 35 values: a full block and a partial block of 3 with its own absmax.
  std::vector<float> a(35, 0.0f);
  a[0] = 2.0f;    // the absmax: x = 1 -> code 15
  a[1] = -2.0f;   // x = -1 -> code 0
  a[2] = 1.0f;    // x = 0.5: below the threshold 0.50166, so 0.4407 (code 12)
  a[3] = 0.0f;    // code 7
  a[32] = -0.5f;  // second block: absmax 0.5, x = -1 -> code 0
  a[33] = 0.3f;   // x = 0.6 (f32): above 0.50166, so 0.5626 (code 13)
  a[34] = 0.0f;   // code 7; the missing 36th value codes as 0 too
  std::vector<uint8_t> packed(18);
  std::vector<float> absmax(2);
  quantize_four_bit(a.data(), 35, 32, FourBitType::nf4, packed.data(), absmax.data());
  EXPECT_EQ(absmax[0], 2.0f);
  EXPECT_EQ(absmax[1], 0.5f);
  EXPECT_EQ(packed[0], 0xF0);
  EXPECT_EQ(packed[1], 0xC7);
  EXPECT_EQ(packed[2], 0x77);
  EXPECT_EQ(packed[16], 0x0D);
  EXPECT_EQ(packed[17], 0x77);
  std::vector<float> back(35);
  dequantize_four_bit(packed.data(), absmax.data(), 35, 32, FourBitType::nf4, back.data());
  EXPECT_EQ(back[0], 2.0f);
  EXPECT_EQ(back[1], -2.0f);
  EXPECT_EQ(back[2], nf4_values()[12] * 2.0f);
  EXPECT_EQ(back[33], nf4_values()[13] * 0.5f);
}

TEST(FourBit, ABlockOfZerosDequantizesToZeros) {
  std::vector<float> a(64, 0.0f), back(64, 1.0f);
  std::vector<uint8_t> packed(32);
  float absmax = -1;
  quantize_four_bit(a.data(), 64, 64, FourBitType::nf4, packed.data(), &absmax);
  EXPECT_EQ(absmax, 0.0f);
  EXPECT_EQ(packed[0], 0x00);  // 0 * (1/0) is NaN, which takes code 0, as in bitsandbytes
  dequantize_four_bit(packed.data(), &absmax, 64, 64, FourBitType::nf4, back.data());
  for (float v : back) EXPECT_EQ(std::fabs(v), 0.0f);
}

TEST(FourBit, BlockSizesArePowersOfTwoFrom32To4096) {
  std::vector<float> a(8192, 1.0f), absmax(256);
  std::vector<uint8_t> packed(4096);
  for (int64_t bs : {16, 48, 8192, 0})
    testing::expect_error(
        [&] {
          quantize_four_bit(a.data(), 8192, bs, FourBitType::nf4, packed.data(), absmax.data());
        },
        "[quantize_4bit]",
        "blocksize must be a power of two from 32 to 4096, got " + std::to_string(bs));
  for (int64_t bs = 32; bs <= 4096; bs *= 2)
    quantize_four_bit(a.data(), 8192, bs, FourBitType::nf4, packed.data(), absmax.data());
}

TEST(FourBit, DoubleQuantizationKeepsTheAbsmaxWithinTheMapsStep) {
  // 600 absmaxes (three groups of 256, the last partial) spread like a weight's.
  std::vector<float> absmax(600), back(600), absmax2(3);
  std::vector<uint8_t> codes(600);
  const auto r = testing::to_f64(testing::random_tensor({600}, 7, DType::f32, 0.01, 0.2));
  for (size_t i = 0; i < 600; ++i) absmax[i] = float(r[i]);
  float offset = 0;
  quantize_absmax(absmax.data(), 600, codes.data(), absmax2.data(), &offset);
  dequantize_absmax(codes.data(), absmax2.data(), offset, 600, back.data());
  // The signed map's widest gap is between its two largest codes: half of it, times the
  // group's absmax, bounds the error (plus f32 rounding).
  const CodeMap& map = dynamic_map_signed();
  const double half_gap = (double(map[254]) - double(map[253])) / 2;
  for (size_t i = 0; i < 600; ++i)
    EXPECT_LE(std::fabs(double(back[i]) - double(absmax[i])), half_gap * absmax2[i / 256] + 1e-7)
        << i;
}

TEST(FourBit, StorageIs4Point127BitsPerParameterWithDoubleQuantization) {
  const int64_t n = int64_t(1) << 24, blocks = blocks_of(n, 64);
  const double plain = double(n / 2 + 4 * blocks) * 8 / double(n);
  const double nested =
      double(n / 2 + blocks + 4 * blocks_of(blocks, kNestedBlocksize) + 4) * 8 / double(n);
  EXPECT_NEAR(plain, 4.5, 1e-9);
  EXPECT_NEAR(nested, 4.127, 0.01);
}

}  // namespace
}  // namespace fitgrad::quant
