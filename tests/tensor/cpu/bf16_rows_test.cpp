// The vectorised bf16 runs (tensor/cpu/bf16_rows.h) against the bf16 format's definition: a
// bf16 is the high 16 bits of an f32, and rounding is to nearest with ties to even, a NaN
// staying a quiet NaN. Run at every ISA level this machine has (IsaPaths in
// tests/CMakeLists.txt), with lengths that leave a scalar tail at every vector width.
#include "tensor/cpu/bf16_rows.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <vector>

namespace fitgrad::cpu {
namespace {

TEST(Bf16Rows, WidenEveryBitPatternToItsHighHalf) {
  std::vector<BFloat16> in(65536 + 7);
  for (size_t i = 0; i < in.size(); ++i) in[i] = BFloat16::from_bits(uint16_t(i));
  std::vector<float> out(in.size());
  widen_bf16(in.data(), int64_t(in.size()), out.data());
  for (size_t i = 0; i < in.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), uint32_t(uint16_t(i)) << 16) << "bits " << i;
}

uint16_t round_one(uint32_t bits) {
  const float x = std::bit_cast<float>(bits);
  BFloat16 out;
  round_to_bf16(&x, 1, &out);
  return out.bits;
}

// Published cases: ties go to the even neighbour, a carry may reach infinity, NaNs stay NaN
// with the quiet bit set.
TEST(Bf16Rows, RoundsToNearestEvenAndKeepsNaNs) {
  const std::vector<std::pair<uint32_t, uint16_t>> cases = {
      {0x3F800000u, 0x3F80u},  // 1.0
      {0x3F808000u, 0x3F80u},  // halfway between 1.0 and its successor: to the even 1.0
      {0x3F818000u, 0x3F82u},  // halfway between 0x3F81 and 0x3F82: to the even 0x3F82
      {0x3F808001u, 0x3F81u},  // just above halfway
      {0x3F807FFFu, 0x3F80u},  // just below halfway
      {0x7F7FFFFFu, 0x7F80u},  // the largest f32 rounds to infinity
      {0x7F800000u, 0x7F80u},  // +inf
      {0xFF800000u, 0xFF80u},  // -inf
      {0x7F800001u, 0x7FC0u},  // a signalling NaN becomes quiet
      {0xFFC12345u, 0xFFC1u},  // a quiet NaN keeps its high half
      {0x00008000u, 0x0000u},  // half the smallest bf16 subnormal: to even zero
      {0x80018000u, 0x8002u},  // halfway, odd: up to the even neighbour
  };
  for (const auto& [in, want] : cases) EXPECT_EQ(round_one(in), want) << std::hex << in;
}

// A sweep over the f32 bit patterns (every 4093rd, plus the cases' neighbours), in one run
// so that whole vectors and the scalar tail both see them, against the scalar rounding.
TEST(Bf16Rows, RoundsARunAsTheScalarRoundingDoes) {
  std::vector<float> in;
  for (uint64_t b = 0; b <= 0xFFFFFFFFu; b += 4093) in.push_back(std::bit_cast<float>(uint32_t(b)));
  for (uint32_t b : {0x3F808000u, 0x3F818000u, 0x7F7FFFFFu, 0x7F800001u, 0xFF800000u})
    for (uint32_t d = 0; d < 3; ++d) in.push_back(std::bit_cast<float>(b + d));
  in.resize(in.size() / 64 * 64 + 13);  // a tail at every vector width
  std::vector<BFloat16> out(in.size());
  round_to_bf16(in.data(), int64_t(in.size()), out.data());
  for (size_t i = 0; i < in.size(); ++i)
    ASSERT_EQ(out[i].bits, f32_to_bf16_bits(in[i])) << std::hex << std::bit_cast<uint32_t>(in[i]);
}

}  // namespace
}  // namespace fitgrad::cpu
