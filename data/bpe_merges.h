// The ranked merges of a BPE vocabulary and the loop that applies them to one piece (Note
// [BPE merge loop] in bpe_merges.cpp), shared by the byte-level tokenizer (bpe_tokenizer.h)
// and the SentencePiece-style one (spm_tokenizer.h), which differ only in how a piece's
// first tokens are found.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace fitgrad::data {

class BpeMerges {
 public:
  struct Merge {
    uint32_t rank;   // kNoMerge when the pair has none
    int32_t result;  // the merged token
  };
  static constexpr uint32_t kNoMerge = 0xFFFFFFFF;

  BpeMerges() = default;
  // Room for `count` merges.
  explicit BpeMerges(size_t count);
  // The merges "left right", in rank order, of a vocabulary whose token ids id_of gives;
  // where(r) names merge r in errors (a malformed merge, or a part or result not a token).
  static BpeMerges parse(const std::vector<std::string>& merges,
                         const std::unordered_map<std::string_view, int32_t>& id_of,
                         const std::function<std::string(size_t)>& where);

  // Registers left + right -> result at `rank`; false (and nothing changes) when the pair
  // already has a merge: a pair listed twice keeps its first rank.
  bool add(int32_t left, int32_t right, uint32_t rank, int32_t result);
  Merge find(int32_t left, int32_t right) const;
  size_t size() const { return count_; }

  // Merges the n ids of one piece (overwriting ids) and appends the result to out.
  void apply(int32_t* ids, size_t n, std::vector<int32_t>& out) const;

  // Pieces of at most this many ids are merged by a linear scan, longer ones through a heap
  // (the same result; the scan is faster on short words). For tests and benchmarks.
  void set_linear_limit(size_t ids) { linear_limit_ = ids; }

 private:
  void merge_linear(int32_t* ids, size_t n, std::vector<int32_t>& out) const;
  void merge_heap(const int32_t* ids, size_t n, std::vector<int32_t>& out) const;

  // Open addressing over (left, right) pairs: keys_ holds left << 32 | right, ~0 when empty.
  std::vector<uint64_t> keys_;
  std::vector<Merge> values_;
  size_t count_ = 0;
  size_t linear_limit_ = 32;
};

}  // namespace fitgrad::data
