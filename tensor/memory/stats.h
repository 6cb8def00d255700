// Allocator statistics, with the meanings PyTorch users know from
// torch.cuda.memory_stats(): each Stat keeps current, peak, total allocated and total
// freed, for all pools together and for the small and large pools apart.
#pragma once

#include <array>
#include <cstdint>

namespace fitgrad {

struct Stat {
  int64_t current = 0;
  int64_t peak = 0;
  int64_t allocated = 0;  // running total of increases
  int64_t freed = 0;      // running total of decreases

  void increase(int64_t n) {
    current += n;
    allocated += n;
    if (current > peak) peak = current;
  }
  void decrease(int64_t n) {
    current -= n;
    freed += n;
  }
  void reset_peak() { peak = current; }
  bool operator==(const Stat&) const = default;
};

enum StatPool : int { kAllPools = 0, kSmallPool = 1, kLargePool = 2 };
using StatArray = std::array<Stat, 3>;  // indexed by StatPool

struct MemoryStats {
  // Counts.
  StatArray allocation;      // live allocations
  StatArray segment;         // segments reserved from the raw source
  StatArray active;          // blocks in use (see Note [Active equals allocated])
  StatArray inactive_split;  // free blocks inside segments that are also partly used
  // Bytes.
  StatArray allocated_bytes;  // rounded sizes of live allocations
  StatArray reserved_bytes;   // sizes of reserved segments (mapped bytes if expandable)
  StatArray active_bytes;
  StatArray inactive_split_bytes;
  StatArray requested_bytes;  // sizes as requested, before rounding
  // Events.
  int64_t num_alloc_retries = 0;  // allocations that freed the cache and retried
  int64_t num_ooms = 0;           // allocations that threw OutOfMemory
  int64_t num_segment_allocs = 0;
  int64_t num_segment_frees = 0;
  // Expandable segments (Note [Expandable segments] in caching_allocator.h): growths of a
  // segment's mapping, and unmappings of its free tail.
  int64_t num_segment_maps = 0;
  int64_t num_segment_unmaps = 0;

  bool operator==(const MemoryStats&) const = default;
};

// Note [Active equals allocated]
// In PyTorch a block is "active" while it is allocated or while a freed block still
// waits for work recorded on another stream. fitgrad's allocator releases a block to
// its stream's pool at free() (cross-stream use is synchronised by the caller), so
// active and allocated agree. They are kept apart so the numbers line up one-to-one
// with torch.cuda.memory_stats() and so deferred frees have a place if a backend adds them.

}  // namespace fitgrad
