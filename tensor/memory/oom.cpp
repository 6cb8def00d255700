// The out-of-memory report: what was asked, what the device holds, and who holds it.
#include <algorithm>

#include "tensor/memory/bytes.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/memory/scope.h"

namespace fitgrad {

// Note [Out of memory in two stages]
// When a new segment would pass the capacity (or the raw source refuses it), the
// allocator first releases every wholly free cached segment and tries again; the stat
// num_alloc_retries counts these. Only if that fails too does it count num_ooms, log an
// oom event and throw OutOfMemory with this report, so the user sees at once whether the
// memory was truly in use or only fragmented in the cache.

std::string CachingAllocator::oom_report(size_t requested, size_t rounded, size_t seg_size,
                                         int stream) const {
  const int64_t allocated = stats_.allocated_bytes[kAllPools].current;
  const int64_t reserved = stats_.reserved_bytes[kAllPools].current;
  // seg_size is the growth of the stream's expandable segment for a large request in the
  // expandable mode (Note [Expandable segments]), there reserved bytes are mapped bytes.
  const bool expand = mode_ == AllocatorMode::expandable && !is_small_request(rounded);
  const std::string need =
      expand ? fmt::format("{} more mapped in the expandable segment of stream {}",
                           format_bytes(int64_t(seg_size)), stream)
             : fmt::format("a new {} segment", format_bytes(int64_t(seg_size)));
  std::string r = fmt::format(
      "[memory] {}: out of memory: tried to allocate {} ({} bytes, rounded to {}, needing {})\n",
      device_.str(), format_bytes(int64_t(requested)), requested, format_bytes(int64_t(rounded)),
      need);
  const bool unlimited = capacity_ == std::numeric_limits<size_t>::max();
  r += fmt::format("  capacity:                {}\n",
                   unlimited ? std::string("unlimited (the device itself refused)")
                             : format_bytes(int64_t(capacity_)));
  r += fmt::format("  allocated:               {}\n", format_bytes(allocated));
  const char* held = mode_ == AllocatorMode::expandable ? "mapped" : "reserved";
  r += fmt::format("  {:<25}{}\n", fmt::format("{}:", held), format_bytes(reserved));
  r += fmt::format("  {} but unallocated: {}\n", held, format_bytes(reserved - allocated));
  if (ledger_.last_mark() != 0)
    r += fmt::format("  last mark:               {}\n", label_text(ledger_.last_mark()));
  r += "  live allocations by category:\n";
  const auto& cats = ledger_.by_category();
  for (int c = 0; c < kNumCategories; ++c)
    if (cats[size_t(c)].current > 0)
      r += fmt::format("    {:>12}  {}\n", format_bytes(cats[size_t(c)].current),
                       category_name(Category(c)));
  r += "  largest live allocations by label:\n";
  const auto labels = ledger_.by_label();
  const size_t shown = std::min<size_t>(labels.size(), 10);
  for (size_t i = 0; i < shown; ++i) {
    const std::string& text = label_text(labels[i].first);
    r += fmt::format("    {:>12}  {}\n", format_bytes(labels[i].second),
                     text.empty() ? "(no label)" : text);
  }
  if (labels.size() > shown)
    r += fmt::format("    ... and {} more labels\n", labels.size() - shown);
  return r;
}

void CachingAllocator::throw_oom(size_t requested, size_t rounded, size_t seg_size, int stream) {
  ++stats_.num_ooms;
  MemoryEvent e;
  e.kind = EventKind::oom;
  const MemoryContext ctx = current_memory_context();
  e.category = ctx.category;
  e.stream = stream;
  e.label = ctx.label;
  e.size = rounded;
  e.requested = requested;
  ledger_.record_oom(e, stats_.allocated_bytes[kAllPools].current,
                     stats_.reserved_bytes[kAllPools].current);
  throw OutOfMemory(oom_report(requested, rounded, seg_size, stream), requested, capacity_);
}

}  // namespace fitgrad
