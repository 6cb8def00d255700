// Packed rows' masks (Note [Packed rows] in tensor/backend/attention_mask.h): for rows packing
// examples of many lengths, with and without a window, the visible keys of each query, the
// queries of each key and the tile ranges of the CPU and cuda flash kernels
// (tensor/backend/cuda_flash_launch.h) against the rule written out by brute force: query i
// sees key j iff both lie in one example, j <= i, and j is within the window. The rows past
// the last that a partial tile holds read the last row's example, not the next batch row's.
#include <gtest/gtest.h>

#include <vector>

#include "tensor/backend/attention_mask.h"
#include "tensor/backend/cuda_flash_launch.h"
#include "tests/tensor/packed_rows_fixture.h"

namespace fitgrad::testing {
namespace {

// The (2, B, T) bounds, each row's sum checked against T.
std::vector<int32_t> bounds_of(const PackedLengths& rows, int64_t t) {
  for (const auto& row : rows) {
    int64_t sum = 0;
    for (const int32_t n : row) sum += n;
    EXPECT_EQ(sum, t);
  }
  return example_bounds(rows, t);
}

struct Packed {
  int64_t t;
  std::vector<std::vector<int32_t>> rows;  // example lengths per row
};

const std::vector<Packed> kCases = {
    {1, {{1}}},
    {64, {{64}, {1, 63}, {32, 32}}},
    {100, {{30, 30, 40}, {1, 1, 1, 97}, {99, 1}}},
    {300, {{7, 120, 64, 64, 45}, {300}, {150, 150}}},
    {1000, {{1, 500, 1, 498}, {333, 333, 334}}},
};

TEST(PackedMask, EachQuerySeesTheCausalKeysOfItsOwnExampleOnly) {
  for (const Packed& c : kCases)
    for (const int64_t window : {int64_t(0), int64_t(1), int64_t(20), int64_t(100)}) {
      const std::vector<int32_t> bounds = bounds_of(c.rows, c.t);
      const int64_t b_rows = int64_t(c.rows.size()), t = c.t;
      backend::AttentionMask all =
          window > 0 ? backend::AttentionMask::sliding(window) : backend::AttentionMask(true);
      all.example_begin = bounds.data();
      all.example_end = bounds.data() + b_rows * t;
      for (int64_t b = 0; b < b_rows; ++b) {
        const backend::AttentionMask mask = all.row(b, t);
        const int32_t* begin = bounds.data() + b * t;
        const auto sees = [&](int64_t i, int64_t j) {
          return begin[i] == begin[j] && j <= i && (window == 0 || j > i - window);
        };
        for (int64_t i = 0; i < t; ++i) {
          int64_t lo = t, hi = 0;
          for (int64_t j = 0; j < t; ++j)
            if (sees(i, j)) lo = std::min(lo, j), hi = j + 1;
          ASSERT_EQ(mask.key_begin(t, t, i), lo) << t << " " << window << " " << b << " " << i;
          ASSERT_EQ(mask.key_end(t, t, i), hi) << t << " " << window << " " << b << " " << i;
          const backend::CudaTileRange naive = backend::cuda_naive_visible(t, t, mask, i);
          ASSERT_EQ(naive.first, lo);
          ASSERT_EQ(naive.end, hi);
        }
        for (int64_t j = 0; j < t; ++j) {
          int64_t lo = t, hi = 0;
          for (int64_t i = 0; i < t; ++i)
            if (sees(i, j)) lo = std::min(lo, i), hi = i + 1;
          ASSERT_EQ(mask.first_query(t, t, j), lo) << t << " " << window << " " << b << " " << j;
          ASSERT_EQ(mask.query_end(t, t, j), hi) << t << " " << window << " " << b << " " << j;
        }
        // The cuda kernels' tiles: a tile pair is visited iff some pair in it is visible, and
        // masked iff some pair in it is hidden.
        for (const int64_t tile : {int64_t(16), int64_t(64)}) {
          for (int64_t q0 = 0; q0 < t; q0 += tile) {
            const backend::CudaTileRange keys =
                backend::cuda_flash_key_tiles(t, t, mask, q0, tile, tile);
            for (int64_t j0 = 0; j0 < t; j0 += tile) {
              bool meet = false, hidden = j0 + tile > t;
              for (int64_t i = q0; i < std::min(q0 + tile, t); ++i)
                for (int64_t j = j0; j < std::min(j0 + tile, t); ++j) {
                  meet = meet || sees(i, j);
                  hidden = hidden || !sees(i, j);
                  ASSERT_EQ(backend::cuda_flash_hidden(t, t, mask, i, j), !sees(i, j));
                }
              const int64_t kt = j0 / tile;
              EXPECT_EQ(meet, kt >= keys.first && kt < keys.end) << t << " " << q0 << " " << j0;
              const backend::CudaTileRange queries =
                  backend::cuda_flash_query_tiles(t, t, mask, j0, tile, tile);
              const int64_t qt = q0 / tile;
              EXPECT_EQ(meet, qt >= queries.first && qt < queries.end)
                  << t << " " << q0 << " " << j0;
              if (hidden) {
                EXPECT_TRUE(backend::cuda_flash_tile_masked(t, t, mask, q0, tile, j0, tile))
                    << t << " " << window << " " << b << " " << q0 << " " << j0;
              }
              if (q0 + tile <= t && !hidden) {
                EXPECT_FALSE(backend::cuda_flash_tile_masked(t, t, mask, q0, tile, j0, tile));
              }
            }
          }
        }
      }
    }
}

TEST(PackedMask, RowsOfOneExampleAreTheCausalMask) {
  const int64_t t = 50;
  const std::vector<int32_t> bounds = bounds_of({{50}, {50}}, t);
  backend::AttentionMask packed(true), causal(true);
  packed.example_begin = bounds.data();
  packed.example_end = bounds.data() + 2 * t;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < t; ++i) {
      EXPECT_EQ(packed.row(b, t).key_begin(t, t, i), causal.key_begin(t, t, i));
      EXPECT_EQ(packed.row(b, t).query_end(t, t, i), causal.query_end(t, t, i));
    }
  EXPECT_FALSE(causal.row(1, t).packed());
}

}  // namespace
}  // namespace fitgrad::testing
