// The layouts of sft_stream.h.
//
// Note [Best-fit-decreasing bins]
// Packing whole examples into rows of seq_len tokens is bin packing. Best fit decreasing
// (TRL's "bfd" strategy, Johnson's 11/9 OPT + 6/9 bound) takes the examples longest first and
// puts each into the open bin it fills most tightly (the least room that still holds it), or
// a new bin when none holds it. Ties go to the earlier example and the earlier bin, so the
// layout depends on the lengths alone. With n examples and an ordered set of bins by room it
// costs O(n log n). The loader's order shuffles the bins like any windows.
#include "data/sft_stream.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>

#include "tensor/error.h"

namespace fitgrad::data {
namespace {

// Appends tokens [0, n) of an example, its first token no target, positions from 0.
void put(SftStream& s, const SftTokens& e, size_t n, bool packed) {
  for (size_t i = 0; i < n; ++i) {
    s.tokens.push_back(e.ids[i]);
    s.trained.push_back(i > 0 && e.trained[i] ? 1 : 0);
    if (packed) s.positions.push_back(int32_t(i));
  }
}

// Pads to the next multiple of seq_len: no targets, one more example for the attention.
void pad_row(SftStream& s, int64_t seq_len, int32_t pad, bool packed) {
  const auto used = int64_t(s.tokens.size()) % seq_len;
  if (used == 0) return;
  for (int64_t i = 0; i < seq_len - used; ++i) {
    s.tokens.push_back(pad);
    s.trained.push_back(0);
    if (packed) s.positions.push_back(int32_t(i));
  }
}

void count(SftStream& s, const SftTokens& e, int64_t seq_len, bool cut) {
  const int64_t n = cut ? std::min<int64_t>(int64_t(e.ids.size()), seq_len) : int64_t(e.ids.size());
  ++s.examples;
  s.real_tokens += n;
  s.trained_tokens += cut ? kept_targets(e, seq_len) : kept_targets(e, int64_t(e.ids.size()));
  if (cut && int64_t(e.ids.size()) > seq_len) ++s.truncated;
}

}  // namespace

Packing parse_packing(std::string_view name) {
  if (name == "none") return Packing::none;
  if (name == "bfd") return Packing::bfd;
  if (name == "wrapped") return Packing::wrapped;
  throw Error(fmt::format("[data] --packing {} is none of none, bfd, wrapped", name));
}

std::string_view packing_name(Packing packing) {
  switch (packing) {
    case Packing::none: return "none";
    case Packing::bfd: return "bfd";
    case Packing::wrapped: return "wrapped";
  }
  return "?";
}

int64_t kept_targets(const SftTokens& e, int64_t limit) {
  FG_CHECK(e.ids.size() == e.trained.size(), "[data] {} trained flags for {} tokens",
           e.trained.size(), e.ids.size());
  const size_t n = std::min(e.ids.size(), size_t(limit));
  int64_t targets = 0;
  for (size_t i = 1; i < n; ++i) targets += e.trained[i] ? 1 : 0;
  return targets;
}

std::vector<std::vector<size_t>> bfd_bins(const std::vector<int64_t>& sizes, int64_t capacity) {
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  std::vector<std::vector<size_t>> bins;
  std::vector<int64_t> rooms;
  std::set<std::pair<int64_t, size_t>> by_room;  // (room left, bin), least room first
  for (const size_t i : order) {
    FG_CHECK(sizes[i] >= 0 && sizes[i] <= capacity, "[data] an item of {} does not fit a bin of {}",
             sizes[i], capacity);
    const auto it = by_room.lower_bound({sizes[i], 0});
    size_t bin = bins.size();
    if (it == by_room.end()) {
      bins.emplace_back();
      rooms.push_back(capacity);
    } else {
      bin = it->second;
      by_room.erase(it);
    }
    bins[bin].push_back(i);
    rooms[bin] -= sizes[i];
    by_room.emplace(rooms[bin], bin);
  }
  return bins;
}

SftStream layout_examples(const std::vector<SftTokens>& examples, int64_t seq_len, int32_t pad,
                          Packing packing) {
  FG_CHECK(seq_len >= 2, "[data] a window of {} tokens holds no target", seq_len);
  SftStream s;
  // A wrapped example is cut nowhere: it keeps all its targets.
  const int64_t limit = packing == Packing::wrapped ? std::numeric_limits<int64_t>::max() : seq_len;
  std::vector<const SftTokens*> kept;
  for (size_t i = 0; i < examples.size(); ++i) {
    if (kept_targets(examples[i], limit) > 0)
      kept.push_back(&examples[i]);
    else
      s.dropped.push_back(i);
  }
  const bool packed = packing != Packing::none;
  if (packing == Packing::none) {
    for (const SftTokens* e : kept) {
      s.lengths.push_back(int32_t(std::min<int64_t>(int64_t(e->ids.size()), seq_len)));
      put(s, *e, size_t(s.lengths.back()), false);
      pad_row(s, seq_len, pad, false);
      count(s, *e, seq_len, true);
    }
  } else if (packing == Packing::bfd) {
    std::vector<int64_t> sizes;
    for (const SftTokens* e : kept)
      sizes.push_back(std::min<int64_t>(int64_t(e->ids.size()), seq_len));
    for (const std::vector<size_t>& bin : bfd_bins(sizes, seq_len)) {
      for (const size_t i : bin) {
        put(s, *kept[i], size_t(sizes[i]), true);
        count(s, *kept[i], seq_len, true);
      }
      pad_row(s, seq_len, pad, true);
    }
  } else {
    for (const SftTokens* e : kept) {
      // Positions restart where a window starts (the piece after a cut is an example of its own).
      for (size_t i = 0, first = 0; i < e->ids.size(); ++i) {
        if (int64_t(s.tokens.size()) % seq_len == 0) first = i;
        s.tokens.push_back(e->ids[i]);
        s.trained.push_back(i > 0 && e->trained[i] ? 1 : 0);
        s.positions.push_back(int32_t(i - first));
      }
      count(s, *e, seq_len, false);
    }
    pad_row(s, seq_len, pad, true);
  }
  s.rows = int64_t(s.tokens.size()) / seq_len;
  s.tokens.push_back(pad);
  s.trained.push_back(0);
  if (packed) s.positions.push_back(0);
  return s;
}

SftStream layout_pairs(const std::vector<SftTokens>& chosen, const std::vector<SftTokens>& rejected,
                       int64_t seq_len, int32_t pad) {
  FG_CHECK(seq_len >= 2, "[data] a window of {} tokens holds no target", seq_len);
  FG_CHECK(chosen.size() == rejected.size(), "[data] {} chosen answers for {} rejected ones",
           chosen.size(), rejected.size());
  std::vector<SftTokens> rows;
  std::vector<size_t> dropped;
  for (size_t i = 0; i < chosen.size(); ++i) {
    if (kept_targets(chosen[i], seq_len) == 0 || kept_targets(rejected[i], seq_len) == 0) {
      dropped.push_back(i);
      continue;
    }
    rows.push_back(chosen[i]);
    rows.push_back(rejected[i]);
  }
  SftStream s = layout_examples(rows, seq_len, pad, Packing::none);
  FG_ASSERT(s.dropped.empty());
  s.examples /= 2;
  s.dropped = std::move(dropped);
  return s;
}

}  // namespace fitgrad::data
