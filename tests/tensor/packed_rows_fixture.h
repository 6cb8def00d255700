// Packed rows for the tests (Note [Packed rows] in tensor/backend/attention_mask.h): the example
// bounds and positions of rows given as their examples' lengths (each row's lengths sum to T).
#pragma once

#include <cstdint>
#include <vector>

namespace fitgrad::testing {

using PackedLengths = std::vector<std::vector<int32_t>>;  // per row, its examples' lengths

// (2, B, T) flattened: [0][b][i] the first position of the example holding position i of row
// b, [1][b][i] one past its last.
inline std::vector<int32_t> example_bounds(const PackedLengths& rows, int64_t t) {
  const auto b = int64_t(rows.size());
  std::vector<int32_t> bounds(size_t(2 * b * t));
  for (int64_t r = 0; r < b; ++r) {
    int32_t at = 0;
    for (const int32_t n : rows[size_t(r)]) {
      for (int32_t i = at; i < at + n; ++i) {
        bounds[size_t(r * t + i)] = at;
        bounds[size_t(b * t + r * t + i)] = at + n;
      }
      at += n;
    }
  }
  return bounds;
}

// (B, T) flattened: each position's place within its example, from 0.
inline std::vector<int32_t> example_positions(const PackedLengths& rows) {
  std::vector<int32_t> positions;
  for (const auto& row : rows)
    for (const int32_t n : row)
      for (int32_t i = 0; i < n; ++i) positions.push_back(i);
  return positions;
}

}  // namespace fitgrad::testing
