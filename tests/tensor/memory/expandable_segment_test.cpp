// The expandable mode of the caching allocator (Note [Expandable segments] in
// tensor/memory/caching_allocator.h): the fragmentation it removes, growth by whole
// granules that merges with the free tail, the unmapping of the free tail, the capacity on
// mapped bytes, reserved bytes equal to what the raw source has mapped, and host and meta
// giving the same events. The expected byte counts are worked out from the policy text.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>

#include "tensor/memory/caching_allocator.h"

namespace fitgrad {
namespace {

constexpr size_t MiB = 1024 * 1024;

// What the allocator holds from its source: bytes of segments plus bytes mapped, and the
// address ranges reserved. Counted at the source, so the allocator's own stats are checked
// against what it really asked for.
struct SourceCounts {
  int64_t held = 0;
  int reservations = 0;
};

class CountingSource final : public RawSource {
 public:
  CountingSource(std::unique_ptr<RawSource> inner, SourceCounts* counts)
      : inner_(std::move(inner)), counts_(counts) {}
  void* allocate(size_t bytes) override {
    void* p = inner_->allocate(bytes);
    if (p) counts_->held += int64_t(bytes);
    return p;
  }
  void release(void* ptr, size_t bytes) override {
    inner_->release(ptr, bytes);
    counts_->held -= int64_t(bytes);
  }
  void* reserve(size_t bytes) override {
    void* p = inner_->reserve(bytes);
    if (p) ++counts_->reservations;
    return p;
  }
  bool map(void* ptr, size_t bytes) override {
    EXPECT_EQ(bytes % kExpandableGranule, 0u);
    const bool ok = inner_->map(ptr, bytes);
    if (ok) counts_->held += int64_t(bytes);
    return ok;
  }
  void unmap(void* ptr, size_t bytes) override {
    EXPECT_EQ(bytes % kExpandableGranule, 0u);
    inner_->unmap(ptr, bytes);
    counts_->held -= int64_t(bytes);
  }
  void release_reservation(void* ptr, size_t bytes) override {
    inner_->release_reservation(ptr, bytes);
    --counts_->reservations;
  }
  bool has_bytes() const override { return inner_->has_bytes(); }

 private:
  std::unique_ptr<RawSource> inner_;
  SourceCounts* counts_;
};

std::unique_ptr<CachingAllocator> make(Device device, AllocatorMode mode,
                                       SourceCounts* counts = nullptr) {
  std::unique_ptr<RawSource> source =
      device.type == DeviceType::meta ? make_virtual_source() : make_host_source();
  if (counts) source = std::make_unique<CountingSource>(std::move(source), counts);
  auto a = std::make_unique<CachingAllocator>(device, std::move(source));
  a->set_mode(mode);
  return a;
}

int64_t reserved(const CachingAllocator& a) { return a.stats().reserved_bytes[kAllPools].current; }

std::vector<std::string> kinds_since(const CachingAllocator& a, uint64_t seq) {
  std::vector<std::string> out;
  for (const MemoryEvent& e : a.events())
    if (e.seq >= seq) out.emplace_back(event_kind_name(e.kind));
  return out;
}

// Four 8 MiB blocks A B C D, then B and C freed, then a 16 MiB request, under a 40 MiB
// capacity. Native: A and B share a 20 MiB segment (its 4 MiB tail free), C and D another,
// so the free holes are 12 MiB (B and the tail) and 8 MiB (C) in two segments that cannot
// merge; 16 MiB needs a new segment, 40 + 16 > 40 and no segment is wholly free: out of
// memory. Expandable: A B C D lie side by side in one segment of 32 mapped MiB, B and C
// merge into one 16 MiB hole, and the request takes it without mapping more.
TEST(ExpandableSegments, FreedNeighboursMergeWhereNativeSegmentsFragment) {
  for (AllocatorMode mode : {AllocatorMode::native, AllocatorMode::expandable}) {
    SCOPED_TRACE(std::string(allocator_mode_name(mode)));
    const auto a_owner = make(Device::meta(), mode);
    CachingAllocator& a = *a_owner;
    a.set_capacity(40 * MiB);
    std::vector<Allocation> blocks;
    for (int i = 0; i < 4; ++i) blocks.push_back(a.allocate(8 * MiB));
    a.free(blocks[1]);
    a.free(blocks[2]);
    const int64_t free_bytes = reserved(a) - a.stats().allocated_bytes[kAllPools].current;
    EXPECT_GE(free_bytes, int64_t(16 * MiB));  // enough free memory in both modes
    if (mode == AllocatorMode::native) {
      EXPECT_EQ(reserved(a), int64_t(40 * MiB));
      EXPECT_THROW(a.allocate(16 * MiB), OutOfMemory);
      EXPECT_EQ(a.stats().num_ooms, 1);
    } else {
      EXPECT_EQ(reserved(a), int64_t(32 * MiB));
      const Allocation big = a.allocate(16 * MiB);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(big.ptr) - reinterpret_cast<uintptr_t>(blocks[0].ptr),
                8 * MiB);  // where B and C were
      EXPECT_EQ(reserved(a), int64_t(32 * MiB));
      EXPECT_EQ(a.stats().num_ooms, 0);
      const MemorySnapshot snap = a.snapshot();
      ASSERT_EQ(snap.segments.size(), 1u);
      EXPECT_TRUE(snap.segments[0].expandable);
      EXPECT_EQ(snap.segments[0].size, 32 * MiB);
      EXPECT_EQ(snap.segments[0].virtual_size, kExpandableReserve);
      ASSERT_EQ(snap.segments[0].blocks.size(), 3u);
      a.free(big);
    }
    a.free(blocks[0]);
    a.free(blocks[3]);
  }
}

// A request maps just the granules its free tail lacks: 8 MiB, freed, then 12 MiB maps
// 4 MiB more and takes the merged block at offset 0; 2.5 MiB then maps another 4 MiB (the
// granules round up), leaving a free 1.5 MiB tail (split off: more than 1 MiB), and 5 MiB
// maps 4 MiB on top of that tail, starting at 14.5 MiB.
TEST(ExpandableSegments, GrowthMapsWholeGranulesAndMergesWithTheFreeTail) {
  const auto a_owner = make(Device::meta(), AllocatorMode::expandable);
  CachingAllocator& a = *a_owner;
  const uint64_t start = a.total_events();
  const Allocation x = a.allocate(8 * MiB);
  a.free(x);
  const Allocation y = a.allocate(12 * MiB);
  EXPECT_EQ(y.ptr, x.ptr);
  EXPECT_EQ(reserved(a), int64_t(12 * MiB));
  const Allocation z = a.allocate(5 * MiB / 2);
  EXPECT_EQ(reserved(a), int64_t(16 * MiB));
  const Allocation w = a.allocate(5 * MiB);
  EXPECT_EQ(reserved(a), int64_t(20 * MiB));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w.ptr) - reinterpret_cast<uintptr_t>(x.ptr), 29 * MiB / 2);
  EXPECT_EQ(kinds_since(a, start),
            (std::vector<std::string>{"segment_alloc", "alloc", "free", "segment_map", "alloc",
                                      "segment_map", "alloc", "segment_map", "alloc"}));
  std::vector<uint64_t> mapped;
  for (const MemoryEvent& e : a.events())
    if (e.kind == EventKind::segment_alloc || e.kind == EventKind::segment_map)
      mapped.push_back(e.size / MiB);
  EXPECT_EQ(mapped, (std::vector<uint64_t>{8, 4, 4, 4}));
  const MemoryStats s = a.stats();
  EXPECT_EQ(s.num_segment_allocs, 1);
  EXPECT_EQ(s.num_segment_maps, 3);
  EXPECT_EQ(s.segment[kAllPools].current, 1);
  for (const Allocation& b : {y, z, w}) a.free(b);
}

// empty_cache unmaps the free tail down to the granule that holds the last used byte, and a
// wholly free segment entirely, giving its reservation back. A (2.5 MiB) maps 4 MiB and
// splits off a free 1.5 MiB; B (5 MiB) maps 4 MiB more and takes 5.5 MiB (a 0.5 MiB rest is
// not split off), C (6 MiB) maps 6 MiB: 14 MiB. With B and C freed the free tail starts at
// 2.5 MiB, so 10 MiB are unmapped from offset 4 MiB and 1.5 MiB stay mapped after A.
TEST(ExpandableSegments, EmptyCacheUnmapsTheFreeTail) {
  SourceCounts counts;
  const auto a_owner = make(Device::cpu(), AllocatorMode::expandable, &counts);
  CachingAllocator& a = *a_owner;
  const Allocation A = a.allocate(5 * MiB / 2);
  const Allocation B = a.allocate(5 * MiB);
  const Allocation C = a.allocate(6 * MiB);
  EXPECT_EQ(reserved(a), int64_t(14 * MiB));
  a.free(C);
  a.free(B);
  EXPECT_EQ(reserved(a), int64_t(14 * MiB));  // freeing unmaps nothing
  a.empty_cache();
  EXPECT_EQ(reserved(a), int64_t(4 * MiB));
  EXPECT_EQ(counts.held, int64_t(4 * MiB));
  const MemoryEvent unmap = a.events().back();
  EXPECT_EQ(unmap.kind, EventKind::segment_unmap);
  EXPECT_EQ(unmap.size, 10 * MiB);
  EXPECT_EQ(unmap.offset, 4 * MiB);
  EXPECT_EQ(unmap.reserved_after, int64_t(4 * MiB));
  MemorySnapshot snap = a.snapshot();
  ASSERT_EQ(snap.segments.size(), 1u);
  EXPECT_EQ(snap.segments[0].size, 4 * MiB);
  ASSERT_EQ(snap.segments[0].blocks.size(), 2u);
  EXPECT_EQ(snap.segments[0].blocks[1].offset, 5 * MiB / 2);
  EXPECT_EQ(snap.segments[0].blocks[1].size, 3 * MiB / 2);
  EXPECT_FALSE(snap.segments[0].blocks[1].allocated);
  EXPECT_EQ(a.stats().inactive_split_bytes[kAllPools].current, int64_t(3 * MiB / 2));
  std::memset(A.ptr, 7, A.size);  // what stays mapped is still memory
  a.free(A);
  a.empty_cache();
  EXPECT_EQ(reserved(a), 0);
  EXPECT_EQ(counts.held, 0);
  EXPECT_EQ(counts.reservations, 0);
  EXPECT_EQ(a.events().back().kind, EventKind::segment_free);
  EXPECT_EQ(a.events().back().size, 4 * MiB);
  EXPECT_TRUE(a.snapshot().segments.empty());
  const MemoryStats s = a.stats();
  EXPECT_EQ(s.num_segment_unmaps, 1);
  EXPECT_EQ(s.num_segment_frees, 1);
  EXPECT_EQ(s.segment[kAllPools].current, 0);
  EXPECT_EQ(s.inactive_split_bytes[kAllPools].current, 0);
}

// The capacity bounds the mapped bytes of all streams; stage one of an out of memory
// unmaps other streams' free tails. Stream 0 maps 20 MiB and frees its last 10; stream 1's
// 10 MiB would make 30 > 24, so the tail is unmapped and the request fits in 20.
TEST(ExpandableSegments, OutOfMemoryStageOneUnmapsFreeTails) {
  const auto a_owner = make(Device::meta(), AllocatorMode::expandable);
  CachingAllocator& a = *a_owner;
  a.set_capacity(24 * MiB);
  const Allocation x = a.allocate(10 * MiB, 0);
  const Allocation y = a.allocate(10 * MiB, 0);
  a.free(y);
  const uint64_t before = a.total_events();
  const Allocation z = a.allocate(10 * MiB, 1);
  EXPECT_EQ(reserved(a), int64_t(20 * MiB));
  EXPECT_EQ(a.stats().num_alloc_retries, 1);
  EXPECT_EQ(kinds_since(a, before),
            (std::vector<std::string>{"segment_unmap", "segment_alloc", "alloc"}));
  EXPECT_EQ(a.snapshot().segments.size(), 2u);  // one per stream
  a.free(z);
  a.free(x);
}

TEST(ExpandableSegments, OutOfMemoryReportsMappedBytes) {
  const auto a_owner = make(Device::meta(), AllocatorMode::expandable);
  CachingAllocator& a = *a_owner;
  a.set_capacity(16 * MiB);
  const Allocation x = a.allocate(10 * MiB);
  std::string report;
  try {
    a.allocate(7 * MiB);  // 10 + 8 > 16, and nothing is free to unmap
    ADD_FAILURE() << "7 MiB cannot fit";
  } catch (const OutOfMemory& e) {
    report = e.what();
  }
  for (const char* want :
       {"needing 8.00 MiB more mapped in the expandable segment of stream 0",
        "capacity:                16.00 MiB", "allocated:               10.00 MiB",
        "mapped:                  10.00 MiB", "mapped but unallocated: 0 B"})
    EXPECT_NE(report.find(want), std::string::npos) << "missing '" << want << "' in\n" << report;
  EXPECT_EQ(reserved(a), int64_t(10 * MiB));
  a.free(x);
}

// Random requests of both pools on two streams, frees and emptied caches, on the host (whose
// memory is written) and on meta: after every step the reserved bytes are exactly what the
// source has mapped or allocated, every expandable segment is whole granules covered by its
// blocks, and both devices record the same events.
TEST(ExpandableSegments, ReservedIsMappedAndHostEqualsMeta) {
  SourceCounts host_counts, meta_counts;
  const auto host_owner = make(Device::cpu(), AllocatorMode::expandable, &host_counts);
  CachingAllocator& host = *host_owner;
  const auto meta_owner = make(Device::meta(), AllocatorMode::expandable, &meta_counts);
  CachingAllocator& meta = *meta_owner;
  for (CachingAllocator* a : {&host, &meta}) {
    a->set_capacity(96 * MiB);
    a->set_trace_capacity(1 << 16);
  }
  auto drive = [](CachingAllocator& a, SourceCounts& counts) {
    std::mt19937_64 rng(27);
    std::vector<Allocation> live;
    for (int i = 0; i < 3000; ++i) {
      const uint64_t r = rng() % 100;
      if (r < 55) {
        const size_t bytes = rng() % 4 == 0 ? 1 + rng() % MiB : MiB + rng() % (24 * MiB);
        try {
          live.push_back(a.allocate(bytes, int(rng() % 2)));
          if (a.has_bytes()) {  // a byte in every MiB, and the last one, are memory
            auto* p = static_cast<unsigned char*>(live.back().ptr);
            for (size_t at = 0; at < live.back().size; at += MiB) p[at] = 1;
            p[live.back().size - 1] = 1;
          }
        } catch (const OutOfMemory&) {
        }
      } else if (r < 98 && !live.empty()) {
        const size_t k = rng() % live.size();
        a.free(live[k]);
        live.erase(live.begin() + std::ptrdiff_t(k));
      } else {
        a.empty_cache();
      }
      ASSERT_EQ(a.stats().reserved_bytes[kAllPools].current, counts.held) << "step " << i;
      int64_t covered = 0;
      for (const SegmentInfo& seg : a.snapshot().segments) {
        uint64_t blocks = 0;
        for (const BlockInfo& b : seg.blocks) blocks += b.size;
        ASSERT_EQ(blocks, seg.size) << "segment " << seg.id << " at step " << i;
        if (seg.expandable) {
          ASSERT_EQ(seg.size % kExpandableGranule, 0u);
        }
        covered += int64_t(seg.size);
      }
      ASSERT_EQ(covered, counts.held);
    }
    // A trace consumer's replay (docs/memory.md): segment_alloc sets a segment's size,
    // segment_map adds, segment_unmap subtracts, segment_free removes it.
    std::map<uint64_t, uint64_t> replayed, snapshot;
    for (const MemoryEvent& e : a.events()) {
      if (e.kind == EventKind::segment_alloc) replayed[e.segment] = e.size;
      if (e.kind == EventKind::segment_map) replayed[e.segment] += e.size;
      if (e.kind == EventKind::segment_unmap) replayed[e.segment] -= e.size;
      if (e.kind == EventKind::segment_free) replayed.erase(e.segment);
    }
    for (const SegmentInfo& seg : a.snapshot().segments) snapshot[seg.id] = seg.size;
    EXPECT_EQ(replayed, snapshot);
    for (const Allocation& x : live) a.free(x);
    a.empty_cache();
  };
  drive(host, host_counts);
  drive(meta, meta_counts);
  const MemoryStats s = host.stats();
  EXPECT_GT(s.num_segment_maps, 0);
  EXPECT_GT(s.num_segment_unmaps, 0);
  EXPECT_GT(s.num_ooms, 0);
  EXPECT_EQ(s, meta.stats());
  EXPECT_EQ(host_counts.held, 0);
  EXPECT_EQ(host_counts.reservations, 0);
  const auto eh = host.events(), em = meta.events();
  ASSERT_EQ(eh.size(), em.size());
  for (size_t i = 0; i < eh.size(); ++i)
    ASSERT_TRUE(eh[i].same_as(em[i])) << "event " << i << ": " << event_kind_name(eh[i].kind)
                                      << " vs " << event_kind_name(em[i].kind);
}

TEST(ExpandableSegments, ModeNames) {
  EXPECT_EQ(parse_allocator_mode("native"), AllocatorMode::native);
  EXPECT_EQ(parse_allocator_mode("expandable"), AllocatorMode::expandable);
  EXPECT_EQ(allocator_mode_name(AllocatorMode::expandable), "expandable");
  EXPECT_THROW(parse_allocator_mode("cuda_malloc_async"), Error);
}

}  // namespace
}  // namespace fitgrad
