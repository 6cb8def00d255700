// NF4 and FP4 against tests/golden/gen_nf4_golden.py, the independent NumPy reference of
// bitsandbytes' 4-bit quantization written from its published algorithm: eleven cases
// (block sizes 32 to 4096, partial last blocks, odd lengths, blocks of zeros, values exactly
// on the NF4 and FP4 thresholds and beside them, heavy tails, double quantization over two
// groups of absmaxes). The packed bytes, absmaxes, double-quantized absmaxes and the f32,
// bf16 and f16 dequantizations must equal the reference's bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tensor/quant/four_bit.h"
#include "tests/golden/golden_file.h"

namespace fitgrad::quant {
namespace {

using testing::GoldenFile;

// The reference's byte arrays: eight per i64, byte j in byte j % 8 of element j / 8.
std::vector<uint8_t> unpack_bytes(const Tensor& packed, size_t n) {
  std::vector<uint8_t> out(size_t(packed.numel()) * 8);
  std::memcpy(out.data(), packed.data<int64_t>(), out.size());
  out.resize(n);
  return out;
}

template <class T>
int64_t bit_mismatches(const std::vector<T>& got, const Tensor& want_f32) {
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float g = float(got[i]), w = want_f32.data<float>()[i];
    bad += std::memcmp(&g, &w, 4) != 0;
  }
  return bad;
}

TEST(FourBitGolden, BytesAbsmaxesAndDequantizationsEqualTheReference) {
  const GoldenFile file(testing::golden_path("nf4_quant.gtb"));
  const auto& cases = file.meta().at("cases");
  ASSERT_GE(cases.size(), 10u);
  for (size_t c = 0; c < cases.size(); ++c) {
    const auto& m = cases[c];
    const std::string key = "case." + std::to_string(c) + ".";
    SCOPED_TRACE(key + m.at("what").get<std::string>());
    const FourBitType type = m.at("quant_type") == "nf4" ? FourBitType::nf4 : FourBitType::fp4;
    const int64_t bs = m.at("blocksize").get<int64_t>(), n = m.at("n").get<int64_t>();
    const int64_t blocks = blocks_of(n, bs);
    const Tensor input = file.tensor(key + "input");
    ASSERT_EQ(input.numel(), n);
    std::vector<uint8_t> packed(size_t((n + 1) / 2));
    std::vector<float> absmax(static_cast<size_t>(blocks));
    quantize_four_bit(input.data<float>(), n, bs, type, packed.data(), absmax.data());
    EXPECT_EQ(packed, unpack_bytes(file.tensor(key + "packed"), packed.size()));
    EXPECT_EQ(bit_mismatches(absmax, file.tensor(key + "absmax")), 0);
    std::vector<float> scale = absmax;
    if (m.at("double_quant").get<bool>()) {
      std::vector<uint8_t> q(static_cast<size_t>(blocks));
      std::vector<float> absmax2(size_t(blocks_of(blocks, kNestedBlocksize)));
      float offset = 0;
      quantize_absmax(absmax.data(), blocks, q.data(), absmax2.data(), &offset);
      EXPECT_EQ(q, unpack_bytes(file.tensor(key + "qabsmax"), q.size()));
      EXPECT_EQ(bit_mismatches(absmax2, file.tensor(key + "absmax2")), 0);
      EXPECT_EQ(offset, file.tensor(key + "offset").data<float>()[0]);
      dequantize_absmax(q.data(), absmax2.data(), offset, blocks, scale.data());
      EXPECT_EQ(bit_mismatches(scale, file.tensor(key + "absmax_dq")), 0);
    }
    std::vector<float> f32(static_cast<size_t>(n));
    std::vector<BFloat16> bf16(static_cast<size_t>(n));
    std::vector<Half> f16(static_cast<size_t>(n));
    dequantize_four_bit(packed.data(), scale.data(), n, bs, type, f32.data());
    dequantize_four_bit(packed.data(), scale.data(), n, bs, type, bf16.data());
    dequantize_four_bit(packed.data(), scale.data(), n, bs, type, f16.data());
    EXPECT_EQ(bit_mismatches(f32, file.tensor(key + "dequant_f32")), 0);
    EXPECT_EQ(bit_mismatches(bf16, file.tensor(key + "dequant_bf16")), 0);
    EXPECT_EQ(bit_mismatches(f16, file.tensor(key + "dequant_f16")), 0);
  }
}

}  // namespace
}  // namespace fitgrad::quant
