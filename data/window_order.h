// The order in which a Loader (data/loader.h) visits its windows in one epoch: the
// identity for sequential order, or a permutation drawn from Philox keyed by the seed and
// the epoch (Note [Epoch permutations] in window_order.cpp). A pure function of its
// arguments, so every worker thread, and a resumed run, computes the same order.
#pragma once

#include <cstdint>
#include <vector>

namespace fitgrad::data {

enum class DataOrder { random, sequential };

// A permutation of 0 .. num_windows - 1.
std::vector<int64_t> window_order(int64_t num_windows, DataOrder order, uint64_t seed,
                                  int64_t epoch);

}  // namespace fitgrad::data
