// Raw memory sources under the CachingAllocator: where segments come from. The policy
// (rounding, pools, splitting, caching) is the allocator's alone, so every source sees
// the same calls given the same requests. Sources here: host (aligned) and virtual (for
// `meta`); cuda/ adds cudaMalloc and pinned host memory through register_raw_source. Host,
// virtual and cudaMalloc sources also reserve address ranges and map memory into them, for
// expandable segments (Note [Expandable segments] in caching_allocator.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tensor/device.h"

namespace fitgrad {

class RawSource {
 public:
  virtual ~RawSource() = default;
  // A block of `bytes` bytes aligned to at least 512 B, or nullptr when the source
  // itself is out of memory (the allocator then frees its cache and retries).
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* ptr, size_t bytes) = 0;
  // Expandable segments: reserve() sets aside `bytes` of address space with no memory
  // behind it and returns its start, or nullptr when the source cannot (pinned memory, or
  // no address space left). map() backs [ptr, ptr + bytes) of a reservation with memory and
  // returns false when the device is out of memory; unmap() gives such a range back. The
  // allocator calls them only with granule-aligned ranges (kExpandableGranule) inside a
  // range reserve() returned, and release_reservation() once per reservation, all unmapped.
  virtual void* reserve(size_t /*bytes*/) { return nullptr; }
  virtual bool map(void* /*ptr*/, size_t /*bytes*/) { return false; }
  virtual void unmap(void* /*ptr*/, size_t /*bytes*/) {}
  virtual void release_reservation(void* /*ptr*/, size_t /*bytes*/) {}
  // False for the virtual source: its addresses have no memory behind them.
  virtual bool has_bytes() const { return true; }

  // Stream-ordered reuse (Note [Blocks other streams use] in caching_allocator.h): an event
  // recorded now on `stream`, as an opaque nonzero handle, or 0 when the source has no
  // streams (host and virtual memory: the work that used a block is done when it is freed).
  virtual uint64_t record_event(int /*stream*/) { return 0; }
  // Whether the work before the event is done; wait_event blocks until it is. Both are
  // called only with handles record_event returned, and release_event exactly once each.
  virtual bool event_done(uint64_t /*event*/) { return true; }
  virtual void wait_event(uint64_t /*event*/) {}
  virtual void release_event(uint64_t /*event*/) {}
};

std::unique_ptr<RawSource> make_host_source();
std::unique_ptr<RawSource> make_virtual_source();

// Backends register factories for their devices. `kind` is "cuda" (called with the device
// index) or "pinned" (index 0).
using RawSourceFactory = std::function<std::unique_ptr<RawSource>(int index)>;
void register_raw_source(const std::string& kind, RawSourceFactory factory);
// nullptr when no backend registered `kind`.
const RawSourceFactory* find_raw_source(const std::string& kind);

}  // namespace fitgrad
