// What an allocator recorded while the code under test ran: take `first =
// allocator_for(device).total_events()` before it, then read the events from there on.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/memory/caching_allocator.h"

namespace fitgrad::testing {

// Every retained event of `device`'s allocator from event `first` on, oldest first.
inline std::vector<MemoryEvent> events_since(uint64_t first, Device device = Device::cpu()) {
  std::vector<MemoryEvent> out;
  for (const MemoryEvent& e : allocator_for(device).events())
    if (e.seq >= first) out.push_back(e);
  return out;
}

// The alloc events among them.
inline std::vector<MemoryEvent> allocations_since(uint64_t first, Device device = Device::cpu()) {
  std::vector<MemoryEvent> out;
  for (const MemoryEvent& e : events_since(first, device))
    if (e.kind == EventKind::alloc) out.push_back(e);
  return out;
}

// The bytes each of those allocations requested, in order.
inline std::vector<uint64_t> requested_since(uint64_t first, Device device = Device::cpu()) {
  std::vector<uint64_t> out;
  for (const MemoryEvent& e : allocations_since(first, device)) out.push_back(e.requested);
  return out;
}

}  // namespace fitgrad::testing
