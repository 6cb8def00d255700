// Expandable segments (Note [Expandable segments] in caching_allocator.h): the large pool of
// each stream as one reserved address range whose mapping grows at its end by granules and
// whose free tail is unmapped when the cache is emptied. The rest of the allocator
// (best fit, split, merge, the ledger) treats the segment as any other.
#include "tensor/memory/block.h"
#include "tensor/memory/bytes.h"
#include "tensor/memory/caching_allocator.h"

namespace fitgrad {

namespace {

size_t round_up_granule(size_t bytes) {
  return (bytes + kExpandableGranule - 1) / kExpandableGranule * kExpandableGranule;
}

Block* last_block(Block* head) {
  while (head->next) head = head->next;
  return head;
}

bool is_free(const Block* b) { return !b->allocated && !b->pending; }

}  // namespace

std::string_view allocator_mode_name(AllocatorMode m) {
  return m == AllocatorMode::expandable ? "expandable" : "native";
}

AllocatorMode parse_allocator_mode(std::string_view text) {
  if (text == "native") return AllocatorMode::native;
  if (text == "expandable") return AllocatorMode::expandable;
  throw Error(fmt::format("[memory] allocator mode '{}' is not native or expandable", text));
}

void CachingAllocator::set_mode(AllocatorMode mode) {
  std::lock_guard lock(mutex_);
  mode_ = mode;
}

AllocatorMode CachingAllocator::mode() const {
  std::lock_guard lock(mutex_);
  return mode_;
}

void CachingAllocator::record_segment_event(EventKind kind, const Segment& seg, uintptr_t addr,
                                            size_t size, size_t offset) {
  MemoryEvent e;
  e.kind = kind;
  e.stream = seg.stream;
  e.addr = addr;
  e.size = size;
  e.segment = seg.id;
  e.offset = offset;
  ledger_.record_segment(e, stats_.allocated_bytes[kAllPools].current,
                         stats_.reserved_bytes[kAllPools].current);
}

size_t CachingAllocator::expandable_growth(int stream, size_t size) const {
  const auto it = expandable_.find(stream);
  if (it == expandable_.end()) return round_up_granule(size);
  const Block* tail = last_block(it->second->head);
  const size_t have = is_free(tail) ? tail->size : 0;
  return round_up_granule(size - have);
}

bool CachingAllocator::grow_expandable(int stream, size_t size) {
  const size_t growth = expandable_growth(stream, size);
  const auto reserved = size_t(stats_.reserved_bytes[kAllPools].current);
  if (growth > capacity_ || reserved > capacity_ - growth) return false;
  auto it = expandable_.find(stream);
  if (it == expandable_.end()) {
    void* base = source_->reserve(kExpandableReserve);
    FG_CHECK(base != nullptr,
             "[memory] {}: the raw source cannot reserve {} of address space for an expandable "
             "segment; use --allocator native",
             device_.str(), format_bytes(int64_t(kExpandableReserve)));
    if (!source_->map(base, growth)) {
      source_->release_reservation(base, kExpandableReserve);
      return false;
    }
    const auto addr = reinterpret_cast<uintptr_t>(base);
    auto* seg =
        new Segment{next_segment_id_++, addr, growth, stream, false, true, kExpandableReserve};
    seg->head = new_block(Block{seg, addr, growth, 0, stream});
    segments_.insert(seg->head);
    expandable_.emplace(stream, seg);
    increase(stats_.segment, false, 1);
    increase(stats_.reserved_bytes, false, int64_t(growth));
    ++stats_.num_segment_allocs;
    record_segment_event(EventKind::segment_alloc, *seg, addr, growth, 0);
    insert_free_block(seg->head);
    return true;
  }
  Segment* seg = it->second;
  if (growth > seg->reserved - seg->size) return false;
  const uintptr_t addr = seg->base + seg->size;
  if (!source_->map(reinterpret_cast<void*>(addr), growth)) return false;
  Block* tail = last_block(seg->head);
  Block* fresh = new_block(Block{seg, addr, growth, 0, stream});
  // A free tail is counted as an inactive split block by whether it has neighbours, which
  // linking the new block changes; insert_free_block then merges the two.
  if (is_free(tail)) update_split_stats(tail, -1);
  fresh->prev = tail;
  tail->next = fresh;
  if (is_free(tail)) update_split_stats(tail, +1);
  const size_t offset = seg->size;
  seg->size += growth;
  increase(stats_.reserved_bytes, false, int64_t(growth));
  ++stats_.num_segment_maps;
  record_segment_event(EventKind::segment_map, *seg, addr, growth, offset);
  insert_free_block(fresh);
  return true;
}

// Note [Unmapping the free tail]
// Only whole granules are unmapped: the tail block keeps the part of the granule that also
// holds the last used byte, so the mapped size stays a multiple of kExpandableGranule. Free
// blocks inside the segment stay mapped (their neighbours on both sides are in use); they
// serve later requests, and they merge as soon as a neighbour is freed. A segment whose only
// block is free is unmapped whole and its reservation given back (segment_free).
void CachingAllocator::unmap_free_tails() {
  std::vector<int> emptied;
  for (auto& [stream, seg] : expandable_) {
    Block* tail = last_block(seg->head);
    if (!is_free(tail)) continue;
    const size_t cut = round_up_granule(tail->offset());
    if (cut >= seg->size) continue;
    const size_t bytes = seg->size - cut;
    const uintptr_t addr = seg->base + cut;
    source_->unmap(reinterpret_cast<void*>(addr), bytes);
    update_split_stats(tail, -1);
    large_free_.erase(tail);
    seg->size = cut;
    decrease(stats_.reserved_bytes, false, int64_t(bytes));
    if (cut == 0) {
      decrease(stats_.segment, false, 1);
      ++stats_.num_segment_frees;
      record_segment_event(EventKind::segment_free, *seg, addr, bytes, 0);
      segments_.erase(seg->head);
      delete_block(seg->head);
      source_->release_reservation(reinterpret_cast<void*>(seg->base), seg->reserved);
      delete seg;
      emptied.push_back(stream);
      continue;
    }
    ++stats_.num_segment_unmaps;
    record_segment_event(EventKind::segment_unmap, *seg, addr, bytes, cut);
    if (tail->offset() == cut) {
      tail->prev->next = nullptr;
      delete_block(tail);
    } else {
      tail->size -= bytes;
      update_split_stats(tail, +1);
      large_free_.insert(tail);
    }
  }
  for (int stream : emptied) expandable_.erase(stream);
}

void CachingAllocator::release_expandable_segments() {
  for (auto& [stream, seg] : expandable_) {
    for (Block* b = seg->head; b;) {
      Block* next = b->next;
      delete_block(b);
      b = next;
    }
    if (seg->size > 0) source_->unmap(reinterpret_cast<void*>(seg->base), seg->size);
    source_->release_reservation(reinterpret_cast<void*>(seg->base), seg->reserved);
    delete seg;
  }
  expandable_.clear();
}

}  // namespace fitgrad
