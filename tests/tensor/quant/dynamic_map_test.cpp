// bitsandbytes' dynamic maps against their published values (Dettmers et al. 2022; the
// bitsandbytes documentation), and the code search: every code value maps to itself, a
// value between two codes goes to the nearer one, and a value past either end to the end.
#include "tensor/quant/dynamic_map.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace fitgrad::quant {
namespace {

TEST(DynamicMap, PublishedValues) {
  const CodeMap& s = dynamic_map_signed();
  const CodeMap& u = dynamic_map_unsigned();
  EXPECT_NEAR(s[0], -0.99297, 1e-5);
  EXPECT_EQ(s[127], 0.0f);
  EXPECT_EQ(s[255], 1.0f);
  EXPECT_EQ(u[0], 0.0f);
  EXPECT_NEAR(u[1], 3.25e-7, 1e-12);
  EXPECT_NEAR(u[254], 0.99648, 1e-5);
  EXPECT_EQ(u[255], 1.0f);
  EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
  EXPECT_TRUE(std::is_sorted(u.begin(), u.end()));
  for (size_t i = 0; i < 127; ++i) EXPECT_EQ(s[i], -s[254 - i]) << i;  // symmetric but for 1
}

TEST(DynamicMap, EveryCodeIsItsOwnNearestAndMidpointsSplitNeighbours) {
  for (bool is_signed : {true, false}) {
    const CodeMap& m = is_signed ? dynamic_map_signed() : dynamic_map_unsigned();
    for (int i = 0; i < 256; ++i) {
      if (i > 0 && m[size_t(i)] == m[size_t(i - 1)]) continue;
      EXPECT_EQ(quantize_code(m, is_signed, m[size_t(i)]), i) << is_signed << " " << i;
      if (i == 255) continue;
      const float lo = m[size_t(i)], hi = m[size_t(i + 1)];
      const float near_lo = lo + (hi - lo) * 0.25f, near_hi = lo + (hi - lo) * 0.75f;
      EXPECT_EQ(quantize_code(m, is_signed, near_lo), i) << is_signed << " " << i;
      EXPECT_EQ(quantize_code(m, is_signed, near_hi), i + 1) << is_signed << " " << i;
    }
    EXPECT_EQ(quantize_code(m, is_signed, 2.0f), 255);
    EXPECT_EQ(quantize_code(m, is_signed, -2.0f), 0);
    EXPECT_EQ(quantize_code(m, is_signed, std::nanf("")), 0);
  }
}

}  // namespace
}  // namespace fitgrad::quant
