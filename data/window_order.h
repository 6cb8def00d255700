// The order in which a Loader (data/loader.h) visits its windows in one epoch: the
// identity for sequential order, or a permutation drawn from Philox keyed by the seed and
// the epoch (Note [Epoch permutations] in window_order.cpp), optionally regrouped by length
// (--group_by_length). Pure functions of their arguments, so every worker thread, and a
// resumed run, computes the same order.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace fitgrad::data {

enum class DataOrder { random, sequential };

// A permutation of 0 .. num_windows - 1.
std::vector<int64_t> window_order(int64_t num_windows, DataOrder order, uint64_t seed,
                                  int64_t epoch);

// Note [Batches grouped by length]: `order` regrouped so that each batch of `batch` windows
// holds windows of similar length, as transformers' LengthGroupedSampler groups them. The order
// is cut into megabatches of m x batch windows, m = min(n / (4 x batch), 50) and at least 1,
// each megabatch sorted longest first (ties keep their order), and the longest window of all
// is swapped to the front, so the first batch is the longest and a run that does not fit
// memory fails at once. lengths[w] is window w's length.
std::vector<int64_t> length_grouped_order(std::vector<int64_t> order,
                                          std::span<const int32_t> lengths, int64_t batch);

}  // namespace fitgrad::data
