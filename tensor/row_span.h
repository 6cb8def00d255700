// A run of positions within one row of a (rows, T) batch: row `row`, positions [begin, end).
// Preference batches name each answer's positions with one (data/loader.h's Batch::spans),
// and autograd::sequence_nll sums a log-likelihood over each.
#pragma once

#include <cstdint>

namespace fitgrad {

struct RowSpan {
  int64_t row = 0;
  int64_t begin = 0;
  int64_t end = 0;
  bool operator==(const RowSpan&) const = default;
};

}  // namespace fitgrad
