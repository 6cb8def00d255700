// The allocator's inner records, shared by its source files only (caching_allocator.cpp,
// expandable_segment.cpp, oom.cpp): a segment is one range from the raw source, a block a
// piece of it. Nothing outside tensor/memory/ includes this header.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/memory/category.h"
#include "tensor/memory/stats.h"

namespace fitgrad {

struct Segment {
  uint64_t id;
  uintptr_t base;
  size_t size;  // expandable: the mapped bytes, from base
  int stream;
  bool small;
  bool expandable = false;
  size_t reserved = 0;           // expandable: the reserved address range, from base
  struct Block* head = nullptr;  // expandable: the block at offset 0
};

// A block is a piece of a segment, allocated or free, linked to its neighbours in
// address order. The head block (lowest address) of a segment lives as long as the
// segment: merges always absorb the later block into the earlier one.
struct Block {
  Segment* segment;
  uintptr_t addr;
  size_t size;
  size_t requested = 0;
  int stream;
  bool allocated = false;
  bool pending = false;      // freed, waiting for other streams' events
  uint64_t stream_uses = 0;  // bit s: stream s also uses the live block
  Category category = Category::other;
  uint32_t label = 0;
  Block* prev = nullptr;
  Block* next = nullptr;

  size_t offset() const { return addr - segment->base; }
  bool is_split() const { return prev != nullptr || next != nullptr; }
};

// A change of `n` to a stat, for all pools and for the block's pool.
inline void increase(StatArray& s, bool small, int64_t n) {
  s[kAllPools].increase(n);
  s[small ? kSmallPool : kLargePool].increase(n);
}
inline void decrease(StatArray& s, bool small, int64_t n) {
  s[kAllPools].decrease(n);
  s[small ? kSmallPool : kLargePool].decrease(n);
}

}  // namespace fitgrad
