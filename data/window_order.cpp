// Epoch permutations for the Loader: a Fisher-Yates shuffle driven by Philox-4x32-10.
#include "data/window_order.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "tensor/error.h"
#include "tensor/random/philox.h"

namespace fitgrad::data {

// Note [Epoch permutations]: a random epoch is the Fisher-Yates shuffle of the identity,
// where step s (s = 0 .. n-2, swapping position i = n-1-s with a position j in [0, i])
// draws the 64-bit word r formed by lanes 2(s%2) and 2(s%2)+1 of the Philox block
//   philox4x32_10(counter = (lo32(s/2), hi32(s/2), lo32(epoch), hi32(epoch)),
//                 key = (lo32(seed), hi32(seed)))
// and takes j = floor(r * (i+1) / 2^64). The epoch lives in counter words 2 and 3, which
// the op streams of Note [Philox streams] (tensor/random/philox.h) leave at 0, so the
// loader's draws never coincide with an op's for the same seed. The multiply-shift maps r
// to [0, i] with a bias below (i+1) / 2^64, far beneath anything a test could see, and
// spends exactly one word a step, so the permutation is a fixed function of
// (n, seed, epoch).
std::vector<int64_t> window_order(int64_t num_windows, DataOrder order, uint64_t seed,
                                  int64_t epoch) {
  FG_ASSERT(num_windows >= 0 && epoch >= 0);
  std::vector<int64_t> perm(static_cast<size_t>(num_windows));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  if (order == DataOrder::sequential) return perm;
  const PhiloxKey key{uint32_t(seed), uint32_t(seed >> 32)};
  const auto e = uint64_t(epoch);
  PhiloxCounter bits{};
  for (int64_t i = num_windows - 1, s = 0; i > 0; --i, ++s) {
    const auto block = uint64_t(s) / 2;
    if (s % 2 == 0) {
      bits = philox4x32_10({uint32_t(block), uint32_t(block >> 32), uint32_t(e), uint32_t(e >> 32)},
                           key);
    }
    const size_t lane = size_t(s % 2) * 2;
    const uint64_t r = uint64_t(bits[lane]) | (uint64_t(bits[lane + 1]) << 32);
    const auto j = int64_t((static_cast<unsigned __int128>(r) * uint64_t(i + 1)) >> 64);
    std::swap(perm[size_t(i)], perm[size_t(j)]);
  }
  return perm;
}

std::vector<int64_t> length_grouped_order(std::vector<int64_t> order,
                                          std::span<const int32_t> lengths, int64_t batch) {
  FG_ASSERT(batch >= 1);
  const auto n = int64_t(order.size());
  const int64_t mega = std::clamp<int64_t>(n / (4 * batch), 1, 50) * batch;
  const auto longer = [&](int64_t a, int64_t b) { return lengths[size_t(a)] > lengths[size_t(b)]; };
  for (int64_t begin = 0; begin < n; begin += mega)
    std::stable_sort(order.begin() + begin, order.begin() + std::min(n, begin + mega), longer);
  if (n > 0) {
    // The megabatches' fronts are their longest: the longest of them goes first.
    int64_t front = 0;
    for (int64_t begin = mega; begin < n; begin += mega)
      if (longer(order[size_t(begin)], order[size_t(front)])) front = begin;
    std::swap(order[0], order[size_t(front)]);
  }
  return order;
}

}  // namespace fitgrad::data
