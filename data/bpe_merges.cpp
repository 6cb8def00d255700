// BpeMerges (bpe_merges.h): the pair table and the merge loop.
//
// Note [BPE merge loop]
// A piece starts as one token per byte. Repeatedly, the adjacent pair with the lowest
// merge rank is replaced by its merged token; among equal ranks (the same pair in
// several places) the leftmost goes first. This is GPT-2's rule: its reference code merges
// every occurrence of the best pair left to right in one pass, which gives the same result
// because a merge's product only takes part in merges of higher rank. The loop ends when
// no adjacent pair has a merge. Short pieces (almost all words) use a linear scan over a
// small array; long ones (runs of digits, symbols or spaces, or PreTokenizer::none) keep
// candidate pairs in a min-heap keyed by (rank, position) over a linked list, and skip
// stale entries, so a piece of n bytes costs O(n log n) rather than O(n^2).
#include "data/bpe_merges.h"

#include <algorithm>
#include <functional>

#include "tensor/error.h"

namespace fitgrad::data {
namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
}
constexpr uint64_t kEmptyKey = ~uint64_t{0};
size_t pair_slot(uint64_t key, size_t mask) {
  return size_t((key * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}

}  // namespace

BpeMerges::BpeMerges(size_t count) {
  size_t capacity = 16;
  while (capacity < count * 2) capacity *= 2;
  keys_.assign(capacity, kEmptyKey);
  values_.assign(capacity, Merge{kNoMerge, -1});
}

bool BpeMerges::add(int32_t left, int32_t right, uint32_t rank, int32_t result) {
  if (keys_.empty() || (count_ + 1) * 2 > keys_.size()) {
    BpeMerges bigger(std::max<size_t>(count_ + 1, keys_.size()));
    for (size_t i = 0; i < keys_.size(); ++i)
      if (keys_[i] != kEmptyKey)
        bigger.add(int32_t(keys_[i] >> 32), int32_t(uint32_t(keys_[i])), values_[i].rank,
                   values_[i].result);
    bigger.linear_limit_ = linear_limit_;
    *this = std::move(bigger);
  }
  const uint64_t key = pair_key(left, right);
  const size_t mask = keys_.size() - 1;
  size_t slot = pair_slot(key, mask);
  while (keys_[slot] != kEmptyKey && keys_[slot] != key) slot = (slot + 1) & mask;
  if (keys_[slot] == key) return false;
  keys_[slot] = key;
  values_[slot] = Merge{rank, result};
  ++count_;
  return true;
}

BpeMerges BpeMerges::parse(const std::vector<std::string>& merges,
                           const std::unordered_map<std::string_view, int32_t>& id_of,
                           const std::function<std::string(size_t)>& where) {
  FG_CHECK(merges.size() < size_t(kNoMerge), "{} too many merges ({})", where(merges.size()),
           merges.size());
  BpeMerges out(merges.size());
  std::string joined;
  for (size_t r = 0; r < merges.size(); ++r) {
    const std::string_view m = merges[r];
    const size_t space = m.find(' ');
    FG_CHECK(space != std::string_view::npos && space > 0 && space + 1 < m.size() &&
                 m.find(' ', space + 1) == std::string_view::npos,
             "{}: expected two tokens separated by one space, got '{}'", where(r), m);
    const std::string_view left = m.substr(0, space), right = m.substr(space + 1);
    const auto l = id_of.find(left), rt = id_of.find(right);
    FG_CHECK(l != id_of.end(), "{}: '{}' is not a token", where(r), left);
    FG_CHECK(rt != id_of.end(), "{}: '{}' is not a token", where(r), right);
    joined.assign(left).append(right);
    const auto result = id_of.find(joined);
    FG_CHECK(result != id_of.end(), "{}: the merged token '{}' is not in the vocabulary", where(r),
             joined);
    out.add(l->second, rt->second, uint32_t(r), result->second);
  }
  return out;
}

BpeMerges::Merge BpeMerges::find(int32_t left, int32_t right) const {
  if (keys_.empty()) return Merge{kNoMerge, -1};
  const uint64_t key = pair_key(left, right);
  const size_t mask = keys_.size() - 1;
  for (size_t slot = pair_slot(key, mask);; slot = (slot + 1) & mask) {
    if (keys_[slot] == key) return values_[slot];
    if (keys_[slot] == kEmptyKey) return Merge{kNoMerge, -1};
  }
}

void BpeMerges::apply(int32_t* ids, size_t n, std::vector<int32_t>& out) const {
  if (n == 1) {
    out.push_back(ids[0]);
  } else if (n <= linear_limit_) {
    merge_linear(ids, n, out);
  } else if (n > 1) {
    merge_heap(ids, n, out);
  }
}

void BpeMerges::merge_linear(int32_t* ids, size_t n, std::vector<int32_t>& out) const {
  // rank[i]/result[i] describe the pair (ids[i], ids[i + 1]).
  constexpr size_t kStack = 64;
  uint32_t rank_stack[kStack];
  int32_t result_stack[kStack];
  std::vector<uint32_t> rank_heap;
  std::vector<int32_t> result_heap;
  uint32_t* rank = rank_stack;
  int32_t* result = result_stack;
  if (n > kStack) {
    rank_heap.resize(n), result_heap.resize(n);
    rank = rank_heap.data(), result = result_heap.data();
  }
  for (size_t i = 0; i + 1 < n; ++i) {
    const Merge m = find(ids[i], ids[i + 1]);
    rank[i] = m.rank, result[i] = m.result;
  }
  size_t len = n;
  while (len > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < len; ++i)
      if (rank[i] < rank[best]) best = i;
    if (rank[best] == kNoMerge) break;
    ids[best] = result[best];
    for (size_t k = best + 1; k + 1 < len; ++k) ids[k] = ids[k + 1];
    for (size_t k = best; k + 2 < len; ++k) rank[k] = rank[k + 1], result[k] = result[k + 1];
    --len;
    if (best > 0) {
      const Merge m = find(ids[best - 1], ids[best]);
      rank[best - 1] = m.rank, result[best - 1] = m.result;
    }
    if (best + 1 < len) {
      const Merge m = find(ids[best], ids[best + 1]);
      rank[best] = m.rank, result[best] = m.result;
    }
  }
  out.insert(out.end(), ids, ids + len);
}

void BpeMerges::merge_heap(const int32_t* ids, size_t n, std::vector<int32_t>& out) const {
  struct Node {
    int32_t id;  // -1 once merged into its left neighbour
    int32_t prev, next;
  };
  std::vector<Node> nodes(n);
  for (size_t i = 0; i < n; ++i)
    nodes[i] = Node{ids[i], int32_t(i) - 1, i + 1 < n ? int32_t(i) + 1 : -1};
  // Entries are rank << 32 | position of the pair's left node; the smallest pops first.
  std::vector<uint64_t> heap;
  heap.reserve(n);
  const auto push = [&](int32_t left) {
    const int32_t right = nodes[size_t(left)].next;
    if (right < 0) return;
    const Merge m = find(nodes[size_t(left)].id, nodes[size_t(right)].id);
    if (m.rank == kNoMerge) return;
    heap.push_back((uint64_t(m.rank) << 32) | uint32_t(left));
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  for (size_t i = 0; i + 1 < n; ++i) push(int32_t(i));
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const uint64_t top = heap.back();
    heap.pop_back();
    const auto left = size_t(uint32_t(top));
    Node& a = nodes[left];
    if (a.id < 0 || a.next < 0) continue;
    Node& b = nodes[size_t(a.next)];
    const Merge m = find(a.id, b.id);
    if (m.rank != uint32_t(top >> 32)) continue;  // stale: the pair here has changed
    a.id = m.result;
    b.id = -1;
    a.next = b.next;
    if (a.next >= 0) nodes[size_t(a.next)].prev = int32_t(left);
    if (a.prev >= 0) push(a.prev);
    push(int32_t(left));
  }
  for (int32_t i = 0; i >= 0; i = nodes[size_t(i)].next) out.push_back(nodes[size_t(i)].id);
}

}  // namespace fitgrad::data
