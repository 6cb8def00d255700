// Ledger bookkeeping: counts by category and label, the event ring, and the peak state.
#include "tensor/memory/ledger.h"

#include <algorithm>
#include <chrono>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "tensor/error.h"

namespace fitgrad {

// Note [Peak capture on the way down]
// Copying the per-label table at every new peak would cost O(labels) on each allocation
// of a growing phase. The breakdown at the peak equals the breakdown just before the
// first free that follows it: between the peak and that free only allocations can
// happen, and each of them sets a newer peak. So a new peak only records its totals and
// sets peak_pending_; the first free after it (or a reader, if none came) copies the
// breakdown once.

// Note [Trace timestamps from the TSC]
// Reading steady_clock costs about 35 ns on the machines we measured, a third of the
// ledger's budget per event. On x86-64 the ring stores raw TSC ticks instead (about
// 14 ns to read; the TSC is invariant on every CPU this targets) and readers convert
// them to nanoseconds with a rate calibrated against steady_clock over the ledger's
// lifetime. Elsewhere the ticks are steady_clock nanoseconds and the rate is 1.

namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
#if defined(__x86_64__)
int64_t now_ticks() { return int64_t(__rdtsc()); }
#else
int64_t now_ticks() { return now_ns(); }
#endif
}  // namespace

double Ledger::ns_per_tick() const {
  const int64_t dt = now_ticks() - start_ticks_;
  const int64_t dn = now_ns() - start_ns_;
  if (dt <= 0 || dn <= 0) return 1.0;
  return double(dn) / double(dt);
}

std::string_view event_kind_name(EventKind k) {
  switch (k) {
    case EventKind::alloc: return "alloc";
    case EventKind::free: return "free";
    case EventKind::segment_alloc: return "segment_alloc";
    case EventKind::segment_free: return "segment_free";
    case EventKind::oom: return "oom";
    case EventKind::mark: return "mark";
    case EventKind::retag_from: return "retag_from";
    case EventKind::retag_to: return "retag_to";
    case EventKind::segment_map: return "segment_map";
    case EventKind::segment_unmap: return "segment_unmap";
  }
  return "?";
}

bool MemoryEvent::same_as(const MemoryEvent& o) const {
  return seq == o.seq && kind == o.kind && category == o.category && stream == o.stream &&
         label == o.label && size == o.size && requested == o.requested && segment == o.segment &&
         offset == o.offset && allocated_after == o.allocated_after &&
         reserved_after == o.reserved_after && category_after == o.category_after;
}

Ledger::Ledger(size_t trace_capacity)
    : ring_(std::max<size_t>(trace_capacity, 1)), start_ns_(now_ns()), start_ticks_(now_ticks()) {}

void Ledger::set_trace_capacity(size_t n) {
  ring_.assign(std::max<size_t>(n, 1), MemoryEvent{});
  // Keep seq numbering: retained events restart from the next one.
}

void Ledger::push(MemoryEvent& e, int64_t allocated, int64_t reserved) {
  e.seq = next_seq_++;
  e.time_ns = now_ticks() - start_ticks_;  // ticks until read out
  e.allocated_after = allocated;
  e.reserved_after = reserved;
  ring_[e.seq % ring_.size()] = e;
}

void Ledger::record_alloc(MemoryEvent e, int64_t allocated, int64_t reserved) {
  const auto c = size_t(e.category);
  category_[c].increase(int64_t(e.size));
  if (e.label >= label_bytes_.size()) label_bytes_.resize(size_t(e.label) + 1, 0);
  label_bytes_[e.label] += int64_t(e.size);
  e.category_after = category_[c].current;
  push(e, allocated, reserved);
  if (allocated > peak_.allocated) {
    peak_.allocated = allocated;
    peak_.reserved = reserved;
    peak_.seq = e.seq;
    peak_.time_ns = e.time_ns;
    peak_.last_mark = last_mark_;
    peak_pending_ = true;
  }
}

void Ledger::record_free(MemoryEvent e, int64_t allocated, int64_t reserved) {
  if (peak_pending_) capture_peak();
  const auto c = size_t(e.category);
  category_[c].decrease(int64_t(e.size));
  FG_ASSERT(e.label < label_bytes_.size());
  label_bytes_[e.label] -= int64_t(e.size);
  e.category_after = category_[c].current;
  push(e, allocated, reserved);
}

void Ledger::record_segment(MemoryEvent e, int64_t allocated, int64_t reserved) {
  push(e, allocated, reserved);
  // A segment change moves reserved but not allocated; keep the peak's reserved exact
  // while the peak state is still the present state.
  if (peak_pending_ && allocated == peak_.allocated) peak_.reserved = reserved;
}

void Ledger::record_retag(MemoryEvent from, MemoryEvent to, int64_t allocated, int64_t reserved) {
  // The breakdown at a pending peak is the one before the move, as with a free.
  if (peak_pending_) capture_peak();
  const auto c_from = size_t(from.category), c_to = size_t(to.category);
  category_[c_from].decrease(int64_t(from.size));
  FG_ASSERT(from.label < label_bytes_.size());
  label_bytes_[from.label] -= int64_t(from.size);
  from.category_after = category_[c_from].current;
  push(from, allocated, reserved);
  category_[c_to].increase(int64_t(to.size));
  if (to.label >= label_bytes_.size()) label_bytes_.resize(size_t(to.label) + 1, 0);
  label_bytes_[to.label] += int64_t(to.size);
  to.category_after = category_[c_to].current;
  push(to, allocated, reserved);
}

void Ledger::record_oom(MemoryEvent e, int64_t allocated, int64_t reserved) {
  push(e, allocated, reserved);
}

void Ledger::mark(uint32_t text, int64_t allocated, int64_t reserved) {
  MemoryEvent e;
  e.kind = EventKind::mark;
  e.label = text;
  last_mark_ = text;
  push(e, allocated, reserved);
}

std::vector<MemoryEvent> Ledger::events() const {
  const uint64_t n = std::min<uint64_t>(next_seq_, ring_.size());
  std::vector<MemoryEvent> out;
  out.reserve(n);
  const double rate = ns_per_tick();
  for (uint64_t s = next_seq_ - n; s < next_seq_; ++s) {
    const MemoryEvent& e = ring_[s % ring_.size()];
    if (e.seq != s) continue;  // a slot cleared by set_trace_capacity
    out.push_back(e);
    out.back().time_ns = int64_t(double(e.time_ns) * rate);
  }
  return out;
}

std::vector<std::pair<uint32_t, int64_t>> Ledger::by_label() const {
  std::vector<std::pair<uint32_t, int64_t>> out;
  for (size_t i = 0; i < label_bytes_.size(); ++i)
    if (label_bytes_[i] > 0) out.emplace_back(uint32_t(i), label_bytes_[i]);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  return out;
}

void Ledger::capture_peak() {
  for (int c = 0; c < kNumCategories; ++c)
    peak_.by_category[size_t(c)] = category_[size_t(c)].current;
  peak_.by_label = by_label();
  peak_pending_ = false;
}

PeakState Ledger::peak() const {
  PeakState p = peak_;
  p.time_ns = int64_t(double(p.time_ns) * ns_per_tick());
  if (!peak_pending_) return p;
  for (int c = 0; c < kNumCategories; ++c) p.by_category[size_t(c)] = category_[size_t(c)].current;
  p.by_label = by_label();
  return p;
}

void Ledger::reset_peak(int64_t allocated, int64_t reserved) {
  for (Stat& s : category_) s.reset_peak();
  peak_ = PeakState{};
  peak_.allocated = allocated;
  peak_.reserved = reserved;
  peak_.seq = next_seq_;
  peak_.time_ns = now_ticks() - start_ticks_;
  peak_.last_mark = last_mark_;
  peak_pending_ = true;
}

}  // namespace fitgrad
