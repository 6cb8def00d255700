// The memory ledger of one allocator: per-category and per-label byte counts, a bounded
// ring of events (alloc, free, segment alloc/free/map/unmap, OOM and user marks), and the
// state at the peak of allocated bytes. The CachingAllocator calls it under its own lock;
// readers take copies through the allocator. Exports live in memory/export.h.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "tensor/memory/category.h"
#include "tensor/memory/stats.h"

namespace fitgrad {

// retag_from / retag_to: a live block changes category and label (CachingAllocator::retag),
// recorded as two events at the same totals: the block leaving its old category and label,
// then entering the new ones (Note [Retagging a live block] in caching_allocator.h).
// segment_map / segment_unmap: an expandable segment maps more memory at its end, or unmaps
// its free tail (Note [Expandable segments] in caching_allocator.h); `size` is the bytes
// mapped or unmapped, `offset` where in the segment they start.
enum class EventKind : uint8_t {
  alloc,
  free,
  segment_alloc,
  segment_free,
  oom,
  mark,
  retag_from,
  retag_to,
  segment_map,
  segment_unmap
};
std::string_view event_kind_name(EventKind k);

struct MemoryEvent {
  uint64_t seq = 0;     // position in the full event sequence of this allocator
  int64_t time_ns = 0;  // steady-clock time since the ledger was created
  EventKind kind = EventKind::alloc;
  Category category = Category::other;
  int32_t stream = 0;
  uint32_t label = 0;      // interned label; for a mark, the mark text
  uint64_t addr = 0;       // block or segment address
  uint64_t size = 0;       // block or segment size, bytes (un)mapped, or asked for (oom)
  uint64_t requested = 0;  // bytes as requested (alloc, free, oom)
  uint64_t segment = 0;    // segment id
  uint64_t offset = 0;     // offset of the block (or (un)mapped range) in its segment
  // Totals after the event, so a window of the ring draws exact counter tracks.
  int64_t allocated_after = 0;
  int64_t reserved_after = 0;
  int64_t category_after = 0;  // bytes of `category` after the event

  // Equal ignoring time and address: the same calls on two devices give equal events.
  bool same_as(const MemoryEvent& o) const;
};

// What held memory when allocated bytes were at their peak.
struct PeakState {
  int64_t allocated = 0;
  int64_t reserved = 0;  // reserved - allocated was cached but free at the peak
  uint64_t seq = 0;      // the event that reached the peak
  int64_t time_ns = 0;
  uint32_t last_mark = 0;  // the user mark in force at the peak (0 = none)
  std::array<int64_t, kNumCategories> by_category{};
  std::vector<std::pair<uint32_t, int64_t>> by_label;  // (label, bytes), bytes > 0, largest first
};

class Ledger {
 public:
  explicit Ledger(size_t trace_capacity = 1 << 17);

  // Called by the allocator after it updated its stats; `allocated`/`reserved` are the
  // all-pool totals after the change.
  void record_alloc(MemoryEvent e, int64_t allocated, int64_t reserved);
  void record_free(MemoryEvent e, int64_t allocated, int64_t reserved);
  void record_segment(MemoryEvent e, int64_t allocated, int64_t reserved);
  void record_oom(MemoryEvent e, int64_t allocated, int64_t reserved);
  // `from` describes the block under its old category and label, `to` under the new ones.
  void record_retag(MemoryEvent from, MemoryEvent to, int64_t allocated, int64_t reserved);
  void mark(uint32_t text, int64_t allocated, int64_t reserved);

  // The retained events, oldest first; total_events() counts the dropped ones too.
  std::vector<MemoryEvent> events() const;
  uint64_t total_events() const { return next_seq_; }
  size_t trace_capacity() const { return ring_.size(); }
  void set_trace_capacity(size_t n);  // clears the retained events

  const std::array<Stat, kNumCategories>& by_category() const { return category_; }
  // (label, current bytes), bytes > 0, largest first.
  std::vector<std::pair<uint32_t, int64_t>> by_label() const;
  PeakState peak() const;
  uint32_t last_mark() const { return last_mark_; }
  // Starts a new peak from the present state (and resets the category peaks).
  void reset_peak(int64_t allocated, int64_t reserved);

 private:
  void push(MemoryEvent& e, int64_t allocated, int64_t reserved);
  void capture_peak();

  double ns_per_tick() const;

  std::vector<MemoryEvent>
      ring_;  // time_ns holds ticks here (Note [Trace timestamps from the TSC])
  uint64_t next_seq_ = 0;
  int64_t start_ns_;
  int64_t start_ticks_;
  std::array<Stat, kNumCategories> category_{};
  std::vector<int64_t> label_bytes_;  // indexed by label id
  uint32_t last_mark_ = 0;
  // See Note [Peak capture on the way down].
  PeakState peak_;
  bool peak_pending_ = false;
};

}  // namespace fitgrad
