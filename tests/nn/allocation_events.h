// What the dry-run equality tests compare of an allocator's record: each event since a point
// (alloc, free, retag) without its time, address and segment ids, so that the same calls on
// the CPU and on meta give equal lists (Note [Meta plans for a target] in
// tensor/backend/profile.h).
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/memory/caching_allocator.h"

namespace fitgrad::testing {

struct Seen {
  EventKind kind;
  uint64_t size, requested;
  Category category;
  uint32_t label;
  bool operator==(const Seen&) const = default;
};

// The events of `alloc` from event number `first` on, segments, marks and OOMs left out.
inline std::vector<Seen> events_since(const CachingAllocator& alloc, uint64_t first) {
  std::vector<Seen> out;
  for (const MemoryEvent& e : alloc.events()) {
    if (e.seq < first || e.kind == EventKind::segment_alloc || e.kind == EventKind::segment_free ||
        e.kind == EventKind::mark || e.kind == EventKind::oom)
      continue;
    out.push_back({e.kind, e.size, e.requested, e.category, e.label});
  }
  return out;
}

}  // namespace fitgrad::testing
