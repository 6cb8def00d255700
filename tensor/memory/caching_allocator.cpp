// The caching allocator: pools, best fit, split and merge, capacity and OOM handling.
// The policy is documented in caching_allocator.h; the stats follow stats.h.
#include "tensor/memory/caching_allocator.h"

#include <algorithm>
#include <limits>
#include <new>
#include <type_traits>

#include "tensor/memory/block.h"
#include "tensor/memory/scope.h"

namespace fitgrad {

size_t round_request(size_t bytes) {
  if (bytes < kMinBlockSize) return kMinBlockSize;
  return (bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

bool is_small_request(size_t rounded) { return rounded <= kSmallSize; }

size_t segment_size_for(size_t rounded) {
  if (is_small_request(rounded)) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return (rounded + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

namespace {

// The ledger event of `kind` for block b as it stands (category, label, bytes, place).
MemoryEvent block_event(EventKind kind, const Block& b) {
  MemoryEvent e;
  e.kind = kind;
  e.category = b.category;
  e.stream = b.stream;
  e.label = b.label;
  e.addr = b.addr;
  e.size = b.size;
  e.requested = b.requested;
  e.segment = b.segment->id;
  e.offset = b.offset();
  return e;
}

bool should_split(const Block* b, size_t size) {
  const size_t remaining = b->size - size;
  return b->segment->small ? remaining >= kMinBlockSize : remaining > kSmallSize;
}

// Largest size that rounding and segment sizing can handle without overflow.
constexpr size_t kMaxRequest = size_t(1) << 60;

}  // namespace

// Note [Device-independent best fit]
// Among free blocks of the same stream and size, the tie is broken by segment id and
// offset rather than by address. Addresses differ between devices (and between runs on
// the host), ids and offsets do not, so the host, CUDA and meta devices make exactly the
// same choices and produce the same trace for the same calls.
bool CachingAllocator::BlockOrder::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return a->stream < b->stream;
  if (a->size != b->size) return a->size < b->size;
  if (a->segment->id != b->segment->id) return a->segment->id < b->segment->id;
  return a->offset() < b->offset();
}

CachingAllocator::CachingAllocator(Device device, std::unique_ptr<RawSource> source)
    : device_(device), source_(std::move(source)), capacity_(std::numeric_limits<size_t>::max()) {}

CachingAllocator::~CachingAllocator() {
  for (const Pending& p : pending_)
    for (uint64_t event : p.events) source_->release_event(event);
  // Live allocations at this point are leaks of the caller; their memory goes back anyway.
  for (Block* head : segments_) {
    Segment* seg = head->segment;
    if (seg->expandable) continue;  // released below
    for (Block* b = head; b;) {
      Block* next = b->next;
      delete_block(b);
      b = next;
    }
    source_->release(reinterpret_cast<void*>(seg->base), seg->size);
    delete seg;
  }
  release_expandable_segments();
}

void CachingAllocator::update_split_stats(Block* b, int sign) {
  if (b->allocated || !b->is_split()) return;
  const bool small = b->segment->small;
  if (sign > 0) {
    increase(stats_.inactive_split, small, 1);
    increase(stats_.inactive_split_bytes, small, int64_t(b->size));
  } else {
    decrease(stats_.inactive_split, small, 1);
    decrease(stats_.inactive_split_bytes, small, int64_t(b->size));
  }
}

Block* CachingAllocator::find_free_block(FreeSet& pool, int stream, size_t size) {
  Segment key_seg{0, 0, 0, stream, false};
  Block key{&key_seg, 0, size, 0, stream};
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* b = *it;
  pool.erase(it);
  return b;
}

Block* CachingAllocator::reserve_segment(size_t seg_size, int stream, bool small) {
  const auto reserved = size_t(stats_.reserved_bytes[kAllPools].current);
  if (seg_size > capacity_ || reserved > capacity_ - seg_size) return nullptr;
  void* ptr = source_->allocate(seg_size);
  if (!ptr) return nullptr;
  auto* seg =
      new Segment{next_segment_id_++, reinterpret_cast<uintptr_t>(ptr), seg_size, stream, small};
  Block* head = new_block(Block{seg, seg->base, seg_size, 0, stream});
  segments_.insert(head);
  increase(stats_.segment, small, 1);
  increase(stats_.reserved_bytes, small, int64_t(seg_size));
  ++stats_.num_segment_allocs;
  MemoryEvent e;
  e.kind = EventKind::segment_alloc;
  e.stream = stream;
  e.addr = seg->base;
  e.size = seg_size;
  e.segment = seg->id;
  ledger_.record_segment(e, stats_.allocated_bytes[kAllPools].current,
                         stats_.reserved_bytes[kAllPools].current);
  return head;
}

void CachingAllocator::release_segment(Block* head) {
  FG_ASSERT(!head->allocated && !head->is_split());
  Segment* seg = head->segment;
  (seg->small ? small_free_ : large_free_).erase(head);
  segments_.erase(head);
  source_->release(reinterpret_cast<void*>(seg->base), seg->size);
  decrease(stats_.segment, seg->small, 1);
  decrease(stats_.reserved_bytes, seg->small, int64_t(seg->size));
  ++stats_.num_segment_frees;
  MemoryEvent e;
  e.kind = EventKind::segment_free;
  e.stream = seg->stream;
  e.addr = seg->base;
  e.size = seg->size;
  e.segment = seg->id;
  ledger_.record_segment(e, stats_.allocated_bytes[kAllPools].current,
                         stats_.reserved_bytes[kAllPools].current);
  delete_block(head);
  delete seg;
}

void CachingAllocator::release_cached_segments() {
  std::vector<Block*> whole_free;
  for (Block* head : segments_)
    if (!head->segment->expandable && !head->allocated && !head->pending && !head->is_split())
      whole_free.push_back(head);
  // In segment order, so every device releases in the same order.
  std::sort(whole_free.begin(), whole_free.end(),
            [](const Block* a, const Block* b) { return a->segment->id < b->segment->id; });
  for (Block* head : whole_free) release_segment(head);
  unmap_free_tails();
}

Block* CachingAllocator::new_block(const Block& init) {
  return new (arena_.get(sizeof(Block))) Block(init);
}

void CachingAllocator::delete_block(Block* b) {
  static_assert(std::is_trivially_destructible_v<Block>);
  arena_.put(b, sizeof(Block));
}

Block* CachingAllocator::split(Block* b, size_t size) {
  Block* rest = new_block(Block{b->segment, b->addr + size, b->size - size, 0, b->stream});
  rest->prev = b;
  rest->next = b->next;
  if (b->next) b->next->prev = rest;
  b->next = rest;
  b->size = size;
  return rest;
}

Allocation CachingAllocator::allocate(size_t bytes, int stream) {
  FG_CHECK(bytes <= kMaxRequest, "[memory] {}: a request of {} bytes is beyond any device",
           device_.str(), bytes);
  const MemoryContext ctx = current_memory_context();
  std::lock_guard lock(mutex_);
  const size_t size = round_request(bytes);
  const bool small = is_small_request(size);
  FreeSet& pool = small ? small_free_ : large_free_;
  if (!pending_.empty()) process_pending(false);
  Block* b = find_free_block(pool, stream, size);
  if (!b) {
    // Native: a new segment. Expandable: more memory mapped at the end of the stream's
    // segment, after which the free tail fits (Note [Expandable segments]).
    const bool expand = !small && mode_ == AllocatorMode::expandable;
    const size_t seg_size = segment_size_for(size);
    auto obtain = [&]() -> Block* {
      if (!expand) return reserve_segment(seg_size, stream, small);
      if (!grow_expandable(stream, size)) return nullptr;
      Block* grown = find_free_block(pool, stream, size);
      FG_ASSERT(grown != nullptr, "the grown expandable segment has no free tail of {} bytes",
                size);
      return grown;
    };
    b = obtain();
    if (!b) {
      // Stage one of Note [Out of memory in two stages]: give the cache back, retry (after
      // waiting for the blocks other streams still use: Note [Blocks other streams use]).
      ++stats_.num_alloc_retries;
      if (!pending_.empty()) {
        process_pending(true);
        b = find_free_block(pool, stream, size);
      }
      if (!b) {
        release_cached_segments();
        b = obtain();
      }
    }
    if (!b) throw_oom(bytes, size, expand ? expandable_growth(stream, size) : seg_size, stream);
  }
  update_split_stats(b, -1);
  if (should_split(b, size)) {
    Block* rest = split(b, size);
    pool.insert(rest);
    update_split_stats(rest, +1);
  }
  b->allocated = true;
  b->requested = bytes;
  b->category = ctx.category;
  b->label = ctx.label;
  increase(stats_.allocation, small, 1);
  increase(stats_.active, small, 1);
  increase(stats_.allocated_bytes, small, int64_t(b->size));
  increase(stats_.active_bytes, small, int64_t(b->size));
  increase(stats_.requested_bytes, small, int64_t(bytes));
  ledger_.record_alloc(block_event(EventKind::alloc, *b), stats_.allocated_bytes[kAllPools].current,
                       stats_.reserved_bytes[kAllPools].current);
  return Allocation{reinterpret_cast<void*>(b->addr), b->size, bytes, b};
}

Category CachingAllocator::category_of(const Allocation& a) const {
  if (!a.handle) return Category::other;
  std::lock_guard lock(mutex_);
  return a.handle->category;
}

void CachingAllocator::retag(const Allocation& a, Category category, uint32_t label) {
  if (!a.handle) return;
  std::lock_guard lock(mutex_);
  Block* b = a.handle;
  FG_ASSERT(b->allocated, "retag of a free {} block at offset {}", device_.str(), b->offset());
  const MemoryEvent from = block_event(EventKind::retag_from, *b);
  b->category = category;
  b->label = label;
  ledger_.record_retag(from, block_event(EventKind::retag_to, *b),
                       stats_.allocated_bytes[kAllPools].current,
                       stats_.reserved_bytes[kAllPools].current);
}

void CachingAllocator::free(const Allocation& a) {
  if (!a.handle) return;
  std::lock_guard lock(mutex_);
  Block* b = a.handle;
  FG_ASSERT(b->allocated, "double free of a {} block at offset {}", device_.str(), b->offset());
  const bool small = b->segment->small;
  decrease(stats_.allocation, small, 1);
  decrease(stats_.active, small, 1);
  decrease(stats_.allocated_bytes, small, int64_t(b->size));
  decrease(stats_.active_bytes, small, int64_t(b->size));
  decrease(stats_.requested_bytes, small, int64_t(b->requested));
  ledger_.record_free(block_event(EventKind::free, *b), stats_.allocated_bytes[kAllPools].current,
                      stats_.reserved_bytes[kAllPools].current);
  b->allocated = false;
  b->requested = 0;
  if (b->stream_uses != 0) {
    Pending p{b, {}};
    for (int s = 0; s < 64; ++s)
      if (b->stream_uses & (uint64_t(1) << s))
        if (const uint64_t event = source_->record_event(s)) p.events.push_back(event);
    b->stream_uses = 0;
    if (!p.events.empty()) {
      b->pending = true;
      pending_.push_back(std::move(p));
      return;
    }
  }
  insert_free_block(b);
}

void CachingAllocator::insert_free_block(Block* b) {
  FreeSet& pool = b->segment->small ? small_free_ : large_free_;
  if (Block* prev = b->prev; prev && !prev->allocated && !prev->pending) {
    update_split_stats(prev, -1);
    pool.erase(prev);
    prev->size += b->size;
    prev->next = b->next;
    if (b->next) b->next->prev = prev;
    delete_block(b);
    b = prev;
  }
  if (Block* next = b->next; next && !next->allocated && !next->pending) {
    update_split_stats(next, -1);
    pool.erase(next);
    b->size += next->size;
    b->next = next->next;
    if (next->next) next->next->prev = b;
    delete_block(next);
  }
  update_split_stats(b, +1);
  pool.insert(b);
}

void CachingAllocator::record_stream(const Allocation& a, int stream) {
  if (!a.handle) return;
  FG_CHECK(stream >= 0 && stream < 64, "[memory] {}: stream {} is not in [0, 64)", device_.str(),
           stream);
  std::lock_guard lock(mutex_);
  Block* b = a.handle;
  FG_ASSERT(b->allocated, "record_stream on a free {} block at offset {}", device_.str(),
            b->offset());
  if (stream != b->stream) b->stream_uses |= uint64_t(1) << stream;
}

size_t CachingAllocator::pending_blocks() const {
  std::lock_guard lock(mutex_);
  return pending_.size();
}

void CachingAllocator::process_pending(bool wait) {
  std::vector<Pending> still;
  for (Pending& p : pending_) {
    bool done = true;
    for (uint64_t event : p.events) {
      if (wait)
        source_->wait_event(event);
      else if (!source_->event_done(event))
        done = false;
    }
    if (!done) {
      still.push_back(std::move(p));
      continue;
    }
    for (uint64_t event : p.events) source_->release_event(event);
    p.block->pending = false;
    insert_free_block(p.block);
  }
  pending_ = std::move(still);
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(mutex_);
  process_pending(true);
  release_cached_segments();
}

void CachingAllocator::set_capacity(size_t bytes) {
  std::lock_guard lock(mutex_);
  capacity_ = bytes;
}

size_t CachingAllocator::capacity() const {
  std::lock_guard lock(mutex_);
  return capacity_;
}

void CachingAllocator::mark(std::string_view text) {
  const uint32_t id = intern_label(text);
  std::lock_guard lock(mutex_);
  ledger_.mark(id, stats_.allocated_bytes[kAllPools].current,
               stats_.reserved_bytes[kAllPools].current);
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard lock(mutex_);
  for (StatArray* s : {&stats_.allocation, &stats_.segment, &stats_.active, &stats_.inactive_split,
                       &stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.active_bytes,
                       &stats_.inactive_split_bytes, &stats_.requested_bytes})
    for (Stat& st : *s) st.reset_peak();
  ledger_.reset_peak(stats_.allocated_bytes[kAllPools].current,
                     stats_.reserved_bytes[kAllPools].current);
}

MemorySnapshot CachingAllocator::snapshot() const {
  std::lock_guard lock(mutex_);
  MemorySnapshot snap;
  snap.device = device_.str();
  snap.capacity = capacity_;
  snap.stats = stats_;
  for (const Block* head : segments_) {
    const Segment* seg = head->segment;
    SegmentInfo info{seg->id,
                     seg->base,
                     seg->size,
                     seg->expandable,
                     seg->expandable ? seg->reserved : seg->size,
                     seg->stream,
                     seg->small,
                     {}};
    for (const Block* b = head; b; b = b->next)
      info.blocks.push_back(
          BlockInfo{b->offset(), b->size, b->requested, b->allocated, b->category, b->label});
    snap.segments.push_back(std::move(info));
  }
  std::sort(snap.segments.begin(), snap.segments.end(),
            [](const SegmentInfo& a, const SegmentInfo& b) { return a.id < b.id; });
  return snap;
}

std::vector<MemoryEvent> CachingAllocator::events() const {
  std::lock_guard lock(mutex_);
  return ledger_.events();
}

uint64_t CachingAllocator::total_events() const {
  std::lock_guard lock(mutex_);
  return ledger_.total_events();
}

void CachingAllocator::set_trace_capacity(size_t events) {
  std::lock_guard lock(mutex_);
  ledger_.set_trace_capacity(events);
}

PeakState CachingAllocator::peak() const {
  std::lock_guard lock(mutex_);
  return ledger_.peak();
}

std::array<Stat, kNumCategories> CachingAllocator::by_category() const {
  std::lock_guard lock(mutex_);
  return ledger_.by_category();
}

std::vector<std::pair<uint32_t, int64_t>> CachingAllocator::by_label() const {
  std::lock_guard lock(mutex_);
  return ledger_.by_label();
}

}  // namespace fitgrad
