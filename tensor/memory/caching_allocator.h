// The device-agnostic caching allocator (DESIGN.md, Allocator and memory ledger). One
// instance per device sits over a RawSource; the policy below is the whole of it, so the
// host, CUDA and meta devices behave identically given the same calls:
//
//   - every request is rounded up to a multiple of 512 B (at least 512 B);
//   - requests of at most 1 MiB use the small pool, which reserves 2 MiB segments;
//   - larger requests use the large pool: a 20 MiB segment below 10 MiB, otherwise the
//     request rounded up to a multiple of 2 MiB;
//   - the free block is chosen best-fit among the free blocks of the same pool and stream
//     (smallest size, then lowest address);
//   - a block is split when the remainder is >= 512 B (small pool) or > 1 MiB (large);
//   - a freed block merges with free neighbours in its segment;
//   - a segment that would pass the capacity limit, or that the source refuses, frees
//     all cached whole-free segments and retries once, then throws OutOfMemory;
//   - empty_cache() releases exactly the segments that are wholly free.
//
// Note [Expandable segments]
// In the `expandable` mode (set_mode; `--allocator expandable` on train and memplan) the
// large pool of each stream is a single segment: a virtual range of kExpandableReserve bytes
// reserved once (RawSource::reserve) into which memory is mapped at the end, in granules of
// kExpandableGranule (2 MiB, the granularity of CUDA's virtual memory management; the host
// and meta sources use the same number, so a plan on meta equals the host run). A large
// request that no free block fits maps just enough granules to make the segment's free tail
// (or a new block at its end) large enough; the new memory merges with that free tail. So
// two freed blocks that sit side by side always merge, where the native mode would keep
// them apart in two segments from two raw allocations. Its blocks split and merge as in the
// native large pool, and a request is not rounded to a segment size. Stage one of an out of
// memory, and empty_cache(), release the wholly free native segments and unmap the free tail
// of each expandable segment down to the granule that holds its last used byte; a segment
// with nothing left mapped gives its reservation back. reserved_bytes counts the mapped
// bytes, and the capacity limit bounds them. The trace records the segment's first mapping
// as segment_alloc, later growths as segment_map, tail unmappings as segment_unmap, and the
// last unmapping as segment_free. The small pool is the same in both modes. Switching the
// mode leaves existing segments in place: their free blocks serve requests as before, and
// only the way new large-pool memory is obtained changes.
//
// Note [Blocks other streams use]
// A block belongs to the stream it was allocated on, and only that stream's requests reuse
// it. When another stream also reads or writes it (the copy stream of an offload, say),
// record_stream(block, that stream) says so, as torch's Tensor.record_stream does. Freeing
// such a block then records an event on each of those streams (RawSource::record_event)
// and keeps the block out of the free pool, unmerged, until every event is done: the
// allocated bytes drop at free() as usual, but the bytes cannot be reused until the other
// streams have finished with them. Each allocation first returns the blocks whose events are
// done; before the out-of-memory retry, and in empty_cache(), the allocator waits for all
// outstanding events. Sources without streams (host, meta) return no event, so there a
// block is reusable at once, as before.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "tensor/device.h"
#include "tensor/error.h"
#include "tensor/memory/ledger.h"
#include "tensor/memory/node_arena.h"
#include "tensor/memory/raw_source.h"
#include "tensor/memory/stats.h"

namespace fitgrad {

inline constexpr size_t kMinBlockSize = 512;
inline constexpr size_t kSmallSize = size_t(1) << 20;       // small pool: <= 1 MiB
inline constexpr size_t kSmallBuffer = size_t(2) << 20;     // small-pool segment
inline constexpr size_t kMinLargeAlloc = size_t(10) << 20;  // below: a 20 MiB segment
inline constexpr size_t kLargeBuffer = size_t(20) << 20;
inline constexpr size_t kRoundLarge = size_t(2) << 20;  // large segments: 2 MiB multiples
// Note [Expandable segments]: the mapping granule and the address range of one segment.
inline constexpr size_t kExpandableGranule = size_t(2) << 20;
inline constexpr size_t kExpandableReserve = size_t(1) << 40;

// How the large pool obtains memory (Note [Expandable segments]).
enum class AllocatorMode : uint8_t { native, expandable };
std::string_view allocator_mode_name(AllocatorMode m);
// "native" or "expandable"; throws fitgrad::Error naming `text` otherwise.
AllocatorMode parse_allocator_mode(std::string_view text);

size_t round_request(size_t bytes);
bool is_small_request(size_t rounded);
size_t segment_size_for(size_t rounded);

// Thrown when an allocation cannot be satisfied after freeing the cache. what() is the
// full report (see CachingAllocator::oom_report).
class OutOfMemory : public Error {
 public:
  OutOfMemory(std::string report, size_t requested, size_t capacity)
      : Error(std::move(report)), requested_(requested), capacity_(capacity) {}
  size_t requested() const { return requested_; }
  size_t capacity() const { return capacity_; }

 private:
  size_t requested_;
  size_t capacity_;
};

struct Block;
struct Segment;

// A live allocation. `handle` is the allocator's block; pass the Allocation back to free().
struct Allocation {
  void* ptr = nullptr;
  size_t size = 0;       // rounded
  size_t requested = 0;  // as asked
  Block* handle = nullptr;
};

struct BlockInfo {
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t requested = 0;  // 0 when free
  bool allocated = false;
  Category category = Category::other;
  uint32_t label = 0;
};

struct SegmentInfo {
  uint64_t id = 0;
  uint64_t addr = 0;
  uint64_t size = 0;  // for an expandable segment, the mapped bytes
  bool expandable = false;
  uint64_t virtual_size = 0;  // the reserved address range (expandable), else size
  int stream = 0;
  bool small_pool = false;
  std::vector<BlockInfo> blocks;  // in address order, covering the segment
};

struct MemorySnapshot {
  std::string device;
  size_t capacity = 0;
  MemoryStats stats;
  std::vector<SegmentInfo> segments;  // by address
};

class CachingAllocator {
 public:
  CachingAllocator(Device device, std::unique_ptr<RawSource> source);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Tags the block with the calling thread's memory context (memory/scope.h).
  Allocation allocate(size_t bytes, int stream = 0);
  void free(const Allocation& a);
  // Note [Blocks other streams use]: `stream` (0..63) uses the live block too.
  void record_stream(const Allocation& a, int stream);
  // Blocks freed but still waiting for another stream's event.
  size_t pending_blocks() const;
  // Note [Retagging a live block]
  // A live block can change what it is for: autograd adopts an op's result as a parameter's
  // first gradient instead of copying it (Note [Adopted gradients] in autograd/tape.cpp), so
  // the block that was a `temporary` becomes `gradient`, labelled "<name>.grad". The bytes
  // and totals do not change; the ledger moves them between categories and labels and
  // records a retag_from and a retag_to event, so the trace replays exactly (on meta too).
  void retag(const Allocation& a, Category category, uint32_t label);
  // The category of a live allocation's block.
  Category category_of(const Allocation& a) const;
  void empty_cache();

  // The capacity limit emulates a smaller card: reserved bytes never exceed it.
  void set_capacity(size_t bytes);
  size_t capacity() const;
  // Note [Expandable segments]. Throws fitgrad::Error when the source cannot reserve address
  // space (pinned memory) at the first request that would need it.
  void set_mode(AllocatorMode mode);
  AllocatorMode mode() const;

  // A user mark in the trace, such as "step 3 / backward".
  void mark(std::string_view text);

  MemoryStats stats() const;
  void reset_peak_stats();
  MemorySnapshot snapshot() const;
  std::vector<MemoryEvent> events() const;
  uint64_t total_events() const;
  void set_trace_capacity(size_t events);
  PeakState peak() const;
  std::array<Stat, kNumCategories> by_category() const;
  std::vector<std::pair<uint32_t, int64_t>> by_label() const;

  Device device() const { return device_; }
  bool has_bytes() const { return source_->has_bytes(); }

 private:
  struct BlockOrder {
    bool operator()(const Block* a, const Block* b) const;
  };
  using FreeSet = std::set<Block*, BlockOrder, ArenaAllocator<Block*>>;

  Block* find_free_block(FreeSet& pool, int stream, size_t size);
  Block* reserve_segment(size_t seg_size, int stream, bool small);
  void release_segment(Block* head);
  // Note [Expandable segments] (expandable_segment.cpp): the bytes the stream's segment
  // must map so that a block of `size` fits at its end; mapping them, false at the capacity
  // or when the source refuses; unmapping every segment's free tail; releasing them all.
  size_t expandable_growth(int stream, size_t size) const;
  bool grow_expandable(int stream, size_t size);
  void unmap_free_tails();
  void release_expandable_segments();
  void record_segment_event(EventKind kind, const Segment& seg, uintptr_t addr, size_t size,
                            size_t offset);
  void release_cached_segments();
  Block* split(Block* b, size_t size);
  Block* new_block(const Block& init);
  void delete_block(Block* b);
  [[noreturn]] void throw_oom(size_t requested, size_t rounded, size_t seg_size, int stream);
  // seg_size: the new segment's size, or in the expandable mode the growth of the stream's
  // segment (Note [Expandable segments]).
  std::string oom_report(size_t requested, size_t rounded, size_t seg_size, int stream) const;
  void update_split_stats(Block* b, int sign);
  // Returns a freed block to its pool, merged with its free neighbours.
  void insert_free_block(Block* b);
  // Returns the pending blocks whose events are done; with `wait`, waits for all of them.
  void process_pending(bool wait);

  struct Pending {
    Block* block;
    std::vector<uint64_t> events;
  };

  Device device_;
  std::unique_ptr<RawSource> source_;
  mutable std::mutex mutex_;
  size_t capacity_;
  NodeArena arena_;  // before the sets: their nodes live in it
  FreeSet small_free_{ArenaAllocator<Block*>(&arena_)};
  FreeSet large_free_{ArenaAllocator<Block*>(&arena_)};
  std::unordered_set<Block*> segments_;  // head block of each segment
  std::vector<Pending> pending_;         // freed, waiting for other streams (in free order)
  AllocatorMode mode_ = AllocatorMode::native;
  std::map<int, Segment*> expandable_;  // the expandable segment of each stream, if any
  uint64_t next_segment_id_ = 0;
  MemoryStats stats_;
  Ledger ledger_;
};

// The allocator of a device (created on first use), and of pinned host memory. Throws
// fitgrad::Error naming the device when no backend provides it.
CachingAllocator& allocator_for(Device device);
CachingAllocator& pinned_allocator();

}  // namespace fitgrad
