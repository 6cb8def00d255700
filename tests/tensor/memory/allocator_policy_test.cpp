// Each rule of the caching allocator's policy (DESIGN.md, Allocator and memory ledger),
// checked with exact byte numbers on the meta device, where segments cost nothing.
// The expected values are written out from the policy text, not from the code.
#include <gtest/gtest.h>

#include "tensor/memory/caching_allocator.h"
#include "tensor/memory/scope.h"

namespace fitgrad {
namespace {

constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * 1024;

CachingAllocator make_meta() { return CachingAllocator(Device::meta(), make_virtual_source()); }

struct RoundCase {
  size_t request;
  size_t rounded;
  bool small;
  size_t segment;
};

TEST(AllocatorPolicy, RoundingPoolAndSegmentSize) {
  const RoundCase cases[] = {
      {1, 512, true, 2 * MiB},
      {511, 512, true, 2 * MiB},
      {512, 512, true, 2 * MiB},
      {513, 1024, true, 2 * MiB},
      {1000, 1024, true, 2 * MiB},
      {MiB, MiB, true, 2 * MiB},
      {MiB + 1, MiB + 512, false, 20 * MiB},
      {5 * MiB, 5 * MiB, false, 20 * MiB},
      {10 * MiB - 1, 10 * MiB, false, 10 * MiB},
      {10 * MiB - 513, 10 * MiB - 512, false, 20 * MiB},
      {10 * MiB, 10 * MiB, false, 10 * MiB},
      {11 * MiB, 11 * MiB, false, 12 * MiB},
      {100 * MiB + 3, 100 * MiB + 512, false, 102 * MiB},
  };
  for (const RoundCase& c : cases) {
    SCOPED_TRACE(c.request);
    EXPECT_EQ(round_request(c.request), c.rounded);
    EXPECT_EQ(is_small_request(c.rounded), c.small);
    EXPECT_EQ(segment_size_for(c.rounded), c.segment);
    auto a = make_meta();
    Allocation x = a.allocate(c.request);
    const MemoryStats s = a.stats();
    const int pool = c.small ? kSmallPool : kLargePool;
    const int other = c.small ? kLargePool : kSmallPool;
    EXPECT_EQ(s.requested_bytes[kAllPools].current, int64_t(c.request));
    EXPECT_EQ(s.reserved_bytes[pool].current, int64_t(c.segment));
    EXPECT_EQ(s.reserved_bytes[other].current, 0);
    EXPECT_EQ(s.segment[pool].current, 1);
    // The whole segment is used when the remainder is too small to split.
    const size_t rest = c.segment - c.rounded;
    const bool splits = c.small ? rest >= 512 : rest > MiB;
    EXPECT_EQ(size_t(s.allocated_bytes[pool].current), splits ? c.rounded : c.segment);
    EXPECT_EQ(x.size, splits ? c.rounded : c.segment);
    a.free(x);
  }
}

TEST(AllocatorPolicy, SmallPoolSplitsDownTo512Bytes) {
  auto a = make_meta();
  Allocation x = a.allocate(MiB);        // [0, 1 MiB) of a 2 MiB segment
  Allocation y = a.allocate(MiB - 512);  // best fit: the 1 MiB rest, leaving 512 B
  Allocation z = a.allocate(100);        // the 512 B remainder, same segment
  const MemorySnapshot snap = a.snapshot();
  ASSERT_EQ(snap.segments.size(), 1u);
  const auto& blocks = snap.segments[0].blocks;
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_EQ(blocks[0].offset, 0u);
  EXPECT_EQ(blocks[1].offset, MiB);
  EXPECT_EQ(blocks[1].size, MiB - 512);
  EXPECT_EQ(blocks[2].offset, 2 * MiB - 512);
  EXPECT_EQ(blocks[2].size, 512u);
  EXPECT_EQ(blocks[2].requested, 100u);
  EXPECT_EQ(a.stats().segment[kAllPools].current, 1);
  a.free(x);
  a.free(y);
  a.free(z);
}

TEST(AllocatorPolicy, LargePoolSplitsOnlyAboveOneMiB) {
  {
    auto a = make_meta();
    Allocation x = a.allocate(19 * MiB);  // rest 1 MiB: not > 1 MiB, so no split
    EXPECT_EQ(x.size, 20 * MiB);
    EXPECT_EQ(a.stats().allocated_bytes[kLargePool].current, int64_t(20 * MiB));
    EXPECT_EQ(a.stats().inactive_split[kAllPools].current, 0);
    a.free(x);
  }
  {
    auto a = make_meta();
    Allocation x = a.allocate(19 * MiB - 512);  // rest 1 MiB + 512: split
    EXPECT_EQ(x.size, 19 * MiB - 512);
    const MemoryStats s = a.stats();
    EXPECT_EQ(s.inactive_split[kLargePool].current, 1);
    EXPECT_EQ(s.inactive_split_bytes[kLargePool].current, int64_t(MiB + 512));
    a.free(x);
    EXPECT_EQ(a.stats().inactive_split[kAllPools].current, 0);  // merged back whole
  }
}

TEST(AllocatorPolicy, BestFitPicksTheSmallestSufficientBlock) {
  auto a = make_meta();
  // Carve one small segment into: [4K used][8K hole][4K used][16K hole][4K used][6K hole][4K used][rest]
  std::vector<Allocation> keep, holes;
  for (size_t hole : {8 * KiB, 16 * KiB, 6 * KiB}) {
    keep.push_back(a.allocate(4 * KiB));
    holes.push_back(a.allocate(hole));
  }
  keep.push_back(a.allocate(4 * KiB));
  const uint64_t hole6_offset = 4 * KiB + 8 * KiB + 4 * KiB + 16 * KiB + 4 * KiB;
  for (auto& h : holes) a.free(h);
  Allocation x = a.allocate(5 * KiB);  // 6K hole is the best fit, not 8K or the rest
  Allocation y = a.allocate(7 * KiB);  // then the 8K hole
  const MemorySnapshot snap = a.snapshot();
  ASSERT_EQ(snap.segments.size(), 1u);
  const uint64_t base = snap.segments[0].addr;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(x.ptr) - base, hole6_offset);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(y.ptr) - base, 4 * KiB);
  // The remainders of 1K and 1K stay as split free blocks.
  a.free(x);
  a.free(y);
  for (auto& k : keep) a.free(k);
  EXPECT_EQ(a.snapshot().segments[0].blocks.size(), 1u);
}

TEST(AllocatorPolicy, BestFitIsPerStream) {
  auto a = make_meta();
  Allocation x = a.allocate(4 * KiB, /*stream=*/0);
  a.free(x);
  Allocation y = a.allocate(4 * KiB, /*stream=*/1);  // may not reuse stream 0's block
  EXPECT_EQ(a.stats().segment[kAllPools].current, 2);
  Allocation z = a.allocate(4 * KiB, /*stream=*/0);  // reuses stream 0's segment
  EXPECT_EQ(a.stats().segment[kAllPools].current, 2);
  EXPECT_EQ(z.ptr, x.ptr);
  a.free(y);
  a.free(z);
}

TEST(AllocatorPolicy, FreeMergesWithBothNeighbours) {
  auto a = make_meta();
  Allocation p = a.allocate(4 * KiB);
  Allocation q = a.allocate(4 * KiB);
  Allocation r = a.allocate(4 * KiB);
  Allocation guard = a.allocate(4 * KiB);  // keeps the tail apart
  a.free(p);
  a.free(r);
  MemoryStats s = a.stats();
  // Free pieces: p (4K), r (4K) and the tail (2 MiB - 16K), all in a split segment.
  EXPECT_EQ(s.inactive_split[kSmallPool].current, 3);
  EXPECT_EQ(s.inactive_split_bytes[kSmallPool].current, int64_t(2 * MiB - 8 * KiB));
  a.free(q);  // merges with p before and r after into one 12K block
  MemorySnapshot snap = a.snapshot();
  ASSERT_EQ(snap.segments[0].blocks.size(), 3u);
  EXPECT_EQ(snap.segments[0].blocks[0].size, 12 * KiB);
  EXPECT_FALSE(snap.segments[0].blocks[0].allocated);
  EXPECT_EQ(a.stats().inactive_split[kSmallPool].current, 2);
  a.free(guard);  // merges with the 12K before and the tail after: the segment is whole
  snap = a.snapshot();
  ASSERT_EQ(snap.segments[0].blocks.size(), 1u);
  EXPECT_EQ(snap.segments[0].blocks[0].size, 2 * MiB);
  s = a.stats();
  EXPECT_EQ(s.inactive_split[kAllPools].current, 0);
  EXPECT_EQ(s.inactive_split_bytes[kAllPools].current, 0);
  EXPECT_EQ(s.reserved_bytes[kAllPools].current, int64_t(2 * MiB));  // still cached
}

TEST(AllocatorPolicy, FragmentationAndEmptyCacheReleaseOnlyWholeFreeSegments) {
  auto a = make_meta();
  // Three small segments, each filled with four 512 KiB blocks.
  std::vector<Allocation> blocks;
  for (int i = 0; i < 12; ++i) blocks.push_back(a.allocate(512 * KiB));
  ASSERT_EQ(a.stats().segment[kSmallPool].current, 3);
  // Free every other block: half the memory is free, but no segment is wholly free.
  for (int i = 0; i < 12; i += 2) a.free(blocks[size_t(i)]);
  MemoryStats s = a.stats();
  EXPECT_EQ(s.allocated_bytes[kAllPools].current, int64_t(6 * 512 * KiB));
  EXPECT_EQ(s.reserved_bytes[kAllPools].current, int64_t(6 * MiB));
  EXPECT_EQ(s.inactive_split_bytes[kAllPools].current, int64_t(3 * MiB));
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved_bytes[kAllPools].current, int64_t(6 * MiB));
  EXPECT_EQ(a.stats().num_segment_frees, 0);
  // Free the rest of the middle segment (blocks 4..7): exactly that one is released.
  a.free(blocks[5]);
  a.free(blocks[7]);
  a.empty_cache();
  s = a.stats();
  EXPECT_EQ(s.reserved_bytes[kAllPools].current, int64_t(4 * MiB));
  EXPECT_EQ(s.segment[kAllPools].current, 2);
  EXPECT_EQ(s.num_segment_frees, 1);
  const MemorySnapshot snap = a.snapshot();
  ASSERT_EQ(snap.segments.size(), 2u);
  EXPECT_EQ(snap.segments[0].id, 0u);
  EXPECT_EQ(snap.segments[1].id, 2u);
  for (int i : {1, 3, 9, 11}) a.free(blocks[size_t(i)]);
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved_bytes[kAllPools].current, 0);
}

TEST(AllocatorPolicy, CapacityRetryFreesTheCacheFirst) {
  auto a = make_meta();
  a.set_capacity(21 * MiB);
  Allocation small = a.allocate(KiB);    // 2 MiB small segment
  a.free(small);                         // cached, wholly free
  Allocation big = a.allocate(8 * MiB);  // needs 20 MiB: 22 > 21, so free the cache, retry
  const MemoryStats s = a.stats();
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(s.num_ooms, 0);
  EXPECT_EQ(s.num_segment_frees, 1);
  EXPECT_EQ(s.reserved_bytes[kAllPools].current, int64_t(20 * MiB));
  a.free(big);
}

TEST(AllocatorPolicy, OutOfMemoryReportNamesTheHolders) {
  auto a = make_meta();
  a.set_capacity(30 * MiB);
  Allocation w, small;
  {
    CategoryScope cat(Category::parameter);
    LabelScope label("layers.0.attn.q_proj.weight");
    w = a.allocate(12 * MiB);  // its own 12 MiB segment
  }
  {
    CategoryScope cat(Category::temporary);
    small = a.allocate(KiB);  // a 2 MiB small segment: reserved 14 MiB
  }
  a.mark("step 3 / backward");
  CategoryScope cat(Category::gradient);
  LabelScope label("layers.0.mlp.fc.weight.grad");
  std::string report;
  try {
    a.allocate(3 * MiB);  // needs a 20 MiB segment: 14 + 20 > 30, and nothing is cached
    ADD_FAILURE() << "a 3 MiB allocation cannot fit";
  } catch (const OutOfMemory& e) {
    report = e.what();
    EXPECT_EQ(e.requested(), 3 * MiB);
    EXPECT_EQ(e.capacity(), 30 * MiB);
  }
  for (const char* want :
       {"[memory] meta: out of memory", "3.00 MiB (3145728 bytes", "20.00 MiB segment",
        "capacity:                30.00 MiB", "allocated:               12.00 MiB",
        "reserved:                14.00 MiB", "reserved but unallocated: 2.00 MiB",
        "step 3 / backward", "12.00 MiB  parameter", "1.00 KiB  temporary",
        "12.00 MiB  layers.0.attn.q_proj.weight"})
    EXPECT_NE(report.find(want), std::string::npos) << "missing '" << want << "' in\n" << report;
  const MemoryStats s = a.stats();
  EXPECT_EQ(s.num_ooms, 1);
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(s.reserved_bytes[kAllPools].current, int64_t(14 * MiB));  // nothing leaked
  EXPECT_EQ(a.events().back().kind, EventKind::oom);
  a.free(w);
  a.free(small);
}

}  // namespace
}  // namespace fitgrad
