// Int8 group quantization (tensor/ops/quantize_int8.h) against tests/golden/gen_int8_golden.py,
// the independent NumPy reference written from Q-GaLore's quantization code: nearest codes,
// scales, zeros, the f32 and bf16 dequantizations and the stochastic codes (the same Philox
// draws) must equal the reference's bit for bit, on groups of 16, 32 and 256 with the edge
// groups (constant, all positive, all negative, an outlier). And stochastic rounding is
// unbiased: the mean of many re-quantizations lands within a few standard deviations.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "tensor/ops/quantize_int8.h"
#include "tensor/quant/int8.h"
#include "tests/golden/golden_file.h"

namespace fitgrad::ops {
namespace {

using testing::GoldenFile;

// Elements where u8 `got` differs from the reference's i64 `want`.
int64_t code_mismatches(const Tensor& got, const Tensor& want) {
  int64_t bad = 0;
  for (int64_t i = 0; i < got.numel(); ++i)
    bad += int64_t(got.data<uint8_t>()[i]) != want.data<int64_t>()[i];
  return bad;
}

// Elements whose f32 bits differ.
int64_t bit_mismatches(const Tensor& got_any, const Tensor& want_f32) {
  const Tensor got = got_any.to(DType::f32);
  int64_t bad = 0;
  for (int64_t i = 0; i < got.numel(); ++i)
    bad += std::memcmp(got.data<float>() + i, want_f32.data<float>() + i, 4) != 0;
  return bad;
}

TEST(Int8Golden, CodesScalesZerosAndDequantizationsEqualTheReference) {
  const GoldenFile file(testing::golden_path("int8_quant.gtb"));
  const auto& meta = file.meta();
  const uint64_t seed = meta.at("seed").get<uint64_t>();
  const uint64_t offset = meta.at("offset").get<uint64_t>();
  ASSERT_EQ(meta.at("cases").size(), 3u);
  for (const auto& c : meta.at("cases")) {
    const std::string name = c.at("name").get<std::string>();
    SCOPED_TRACE(name);
    const int64_t gs = c.at("group_size").get<int64_t>();
    const Tensor input = file.tensor(name + ".input");
    Int8 q = quantize_int8(input, gs);
    EXPECT_EQ(q.shape(), input.shape());
    EXPECT_EQ(code_mismatches(q.codes, file.tensor(name + ".codes")), 0);
    EXPECT_EQ(bit_mismatches(q.scales, file.tensor(name + ".scales")), 0);
    EXPECT_EQ(code_mismatches(q.zeros, file.tensor(name + ".zeros")), 0);
    EXPECT_EQ(bit_mismatches(dequantize_int8(q, DType::f32), file.tensor(name + ".dequant_f32")),
              0);
    EXPECT_EQ(bit_mismatches(dequantize_int8(q, DType::bf16), file.tensor(name + ".dequant_bf16")),
              0);
    requantize_int8_(q, input, {true, seed, offset});
    EXPECT_EQ(code_mismatches(q.codes, file.tensor(name + ".sr_codes")), 0);
    EXPECT_EQ(bit_mismatches(q.scales, file.tensor(name + ".scales")), 0);
  }
}

// Each interior value's stochastic codes average to the value: over M re-quantizations with
// fresh draws, |mean - w| <= 5 sigma, sigma = scale * sqrt(p (1 - p) / M) (plus an f32 ulp).
TEST(Int8StochasticRounding, IsUnbiased) {
  constexpr int64_t kGroup = 256, kTrials = 400;
  Tensor w = Tensor::empty({2, kGroup}, DType::f32);
  for (int64_t i = 0; i < w.numel(); ++i)
    w.data<float>()[i] = 0.013f * std::sin(0.37f * float(i)) + (i % kGroup == 7 ? 0.02f : 0.0f);
  Int8 q = quantize_int8(w, kGroup);
  std::vector<double> sum(size_t(w.numel()), 0.0);
  for (int64_t t = 0; t < kTrials; ++t) {
    requantize_int8_(q, w, {true, 99, uint64_t(t * w.numel())});
    const Tensor d = dequantize_int8(q, DType::f32);
    for (int64_t i = 0; i < w.numel(); ++i) sum[size_t(i)] += d.data<float>()[i];
  }
  int64_t checked = 0;
  for (int64_t i = 0; i < w.numel(); ++i) {
    const float s = q.scales.data<float>()[i / kGroup];
    const float zero = float(q.zeros.data<uint8_t>()[i / kGroup]);
    const double r = double(w.data<float>()[i]) / s;
    if (r + zero < 1 || r + zero > 254) continue;  // the clamp at 0 and 255 is biased
    const double p = r - std::floor(r);
    const double sigma = s * std::sqrt(p * (1 - p) / double(kTrials));
    EXPECT_LE(std::abs(sum[size_t(i)] / kTrials - w.data<float>()[i]), 5 * sigma + 1e-7) << i;
    ++checked;
  }
  EXPECT_GT(checked, w.numel() * 9 / 10);
}

TEST(Int8Quantize, GroupSizeMustDivideAndNameTheFlag) {
  const Tensor w = Tensor::zeros({3, 10}, DType::f32);
  try {
    quantize_int8(w, 256);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--weight_group_size 256"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(quantize_int8(w, 15));
}

TEST(Int8Quantize, MetaAllocatesTheStateAndComputesNothing) {
  const Tensor w = Tensor::empty({64, 32}, DType::bf16, Device::meta());
  Int8 q = quantize_int8(w, 256);
  EXPECT_EQ(q.codes.device(), Device::meta());
  EXPECT_EQ(q.nbytes(), 64 * 32 + 8 * 4 + 8);
  EXPECT_EQ(dequantize_int8(q, DType::bf16).shape(), (Shape{64, 32}));
  requantize_int8_(q, Tensor::empty({64, 32}, DType::f32, Device::meta()), {true, 1, 0});
}

}  // namespace
}  // namespace fitgrad::ops
