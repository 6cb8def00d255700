// bitsandbytes' dynamic maps against their published values (Dettmers et al. 2022; the
// bitsandbytes documentation), and the code search: every code value maps to itself, a
// value between two codes goes to the nearer one, a value past either end to the end, and
// CodeSearch agrees with bitsandbytes' quantize_2D search, written out literally below,
// on every code, every midpoint and the floats beside them, and a million random values.
#include "tensor/quant/dynamic_map.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace fitgrad::quant {
namespace {

// bitsandbytes' quantize_2D (csrc/kernels.cu), as its steps are described: a binary search
// from pivot 127, then the midpoint test against the bound on x's side.
int bnb_search(const CodeMap& m, bool is_signed, float x) {
  int pivot = 127, upper_pivot = 255, lower_pivot = 0;
  float lower = is_signed ? -1.0f : 0.0f, upper = 1.0f;
  for (int step = 64; step > 0; step >>= 1) {
    const float val = m[size_t(pivot)];
    if (x > val) {
      lower_pivot = pivot;
      lower = val;
      pivot += step;
    } else {
      upper_pivot = pivot;
      upper = val;
      pivot -= step;
    }
  }
  const float val = m[size_t(pivot)];
  if (x > val) return x > (upper + val) * 0.5f ? upper_pivot : pivot;
  return x < (lower + val) * 0.5f ? lower_pivot : pivot;
}

TEST(DynamicMap, TheSearchIsBitsandbytesQuantize2D) {
  for (bool is_signed : {true, false}) {
    const CodeMap& m = is_signed ? dynamic_map_signed() : dynamic_map_unsigned();
    const CodeSearch& search = is_signed ? signed_search() : unsigned_search();
    std::vector<float> xs = {std::nanf(""), INFINITY, -INFINITY, 0.0f, -0.0f, 1.0f, -1.0f};
    for (size_t i = 0; i < 256; ++i) {
      xs.push_back(m[i]);
      if (i + 1 < 256) xs.push_back((m[i] + m[i + 1]) * 0.5f);
    }
    const size_t exact = xs.size();
    for (size_t i = 0; i < exact; ++i) {
      xs.push_back(std::nextafter(xs[i], INFINITY));
      xs.push_back(std::nextafter(xs[i], -INFINITY));
    }
    uint64_t state = 12345;
    for (int i = 0; i < 1'000'000; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const float u = float(state >> 40) * 0x1p-24f;  // [0, 1)
      // Spread over the map's seven decades, both signs.
      xs.push_back((i % 2 ? -1.0f : 1.0f) * std::pow(10.0f, -7.0f * u));
    }
    int64_t mismatches = 0;
    for (float x : xs) mismatches += search.code(x) != bnb_search(m, is_signed, x);
    EXPECT_EQ(mismatches, 0) << (is_signed ? "signed" : "unsigned");
  }
}

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
    const CodeSearch& search = is_signed ? signed_search() : unsigned_search();
    for (int i = 0; i < 256; ++i) {
      if (i > 0 && m[size_t(i)] == m[size_t(i - 1)]) continue;
      EXPECT_EQ(search.code(m[size_t(i)]), i) << is_signed << " " << i;
      if (i == 255) continue;
      const float lo = m[size_t(i)], hi = m[size_t(i + 1)];
      const float near_lo = lo + (hi - lo) * 0.25f, near_hi = lo + (hi - lo) * 0.75f;
      EXPECT_EQ(search.code(near_lo), i) << is_signed << " " << i;
      EXPECT_EQ(search.code(near_hi), i + 1) << is_signed << " " << i;
    }
    EXPECT_EQ(search.code(2.0f), 255);
    EXPECT_EQ(search.code(-2.0f), 0);
    EXPECT_EQ(search.code(std::nanf("")), 0);
  }
}

}  // namespace
}  // namespace fitgrad::quant
