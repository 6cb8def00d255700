// Randomized allocator checks: 100k+ mixed allocations and frees, with the invariants
// recounted from the block lists after every operation, and the host and meta devices
// driven by the same calls giving identical stats, snapshots and traces.
#include <gtest/gtest.h>

#include <random>

#include "tensor/memory/caching_allocator.h"
#include "tensor/memory/scope.h"

namespace fitgrad {
namespace {

constexpr size_t MiB = 1024 * 1024;

// A size mix like a transformer's: many small tensors, some large ones, a few huge.
size_t draw_size(std::mt19937_64& rng) {
  const int kind = int(rng() % 100);
  if (kind < 60) return 1 + rng() % (64 * 1024);
  if (kind < 85) return 1 + rng() % MiB;
  if (kind < 97) return MiB + 1 + rng() % (9 * MiB);
  return 10 * MiB + rng() % (40 * MiB);
}

struct Recount {
  StatArray allocated_bytes{}, reserved_bytes{}, requested_bytes{}, inactive_split_bytes{};
  StatArray allocation{}, segment{}, inactive_split{};
};

void add(StatArray& s, bool small, int64_t n) {
  s[kAllPools].current += n;
  s[small ? kSmallPool : kLargePool].current += n;
}

// Checks the snapshot's structure and that the stats equal a recount of its blocks.
void check_invariants(const CachingAllocator& a, const std::vector<Allocation>& live) {
  const MemorySnapshot snap = a.snapshot();
  Recount r;
  size_t live_blocks = 0;
  for (const SegmentInfo& seg : snap.segments) {
    add(r.segment, seg.small_pool, 1);
    add(r.reserved_bytes, seg.small_pool, int64_t(seg.size));
    uint64_t at = 0;
    bool prev_free = false;
    for (const BlockInfo& b : seg.blocks) {
      ASSERT_EQ(b.offset, at) << "blocks must tile their segment";
      ASSERT_GT(b.size, 0u);
      ASSERT_EQ(b.size % 512, 0u);
      at += b.size;
      if (b.allocated) {
        ++live_blocks;
        ASSERT_LE(b.requested, b.size);
        add(r.allocation, seg.small_pool, 1);
        add(r.allocated_bytes, seg.small_pool, int64_t(b.size));
        add(r.requested_bytes, seg.small_pool, int64_t(b.requested));
      } else {
        ASSERT_FALSE(prev_free) << "two free neighbours were not merged";
        if (seg.blocks.size() > 1) {
          add(r.inactive_split, seg.small_pool, 1);
          add(r.inactive_split_bytes, seg.small_pool, int64_t(b.size));
        }
      }
      prev_free = !b.allocated;
    }
    ASSERT_EQ(at, seg.size);
  }
  ASSERT_EQ(live_blocks, live.size());
  const MemoryStats& s = snap.stats;
  for (int p : {kAllPools, kSmallPool, kLargePool}) {
    ASSERT_EQ(s.allocated_bytes[p].current, r.allocated_bytes[p].current) << "pool " << p;
    ASSERT_EQ(s.active_bytes[p].current, r.allocated_bytes[p].current);
    ASSERT_EQ(s.reserved_bytes[p].current, r.reserved_bytes[p].current);
    ASSERT_EQ(s.requested_bytes[p].current, r.requested_bytes[p].current);
    ASSERT_EQ(s.inactive_split_bytes[p].current, r.inactive_split_bytes[p].current);
    ASSERT_EQ(s.allocation[p].current, r.allocation[p].current);
    ASSERT_EQ(s.segment[p].current, r.segment[p].current);
    ASSERT_EQ(s.inactive_split[p].current, r.inactive_split[p].current);
    ASSERT_LE(s.allocated_bytes[p].current, s.reserved_bytes[p].current);
    ASSERT_LE(s.allocated_bytes[p].current, s.allocated_bytes[p].peak);
  }
}

// Live blocks never overlap: sort live allocations by address and compare neighbours.
void check_no_overlap(std::vector<Allocation> live) {
  std::sort(live.begin(), live.end(),
            [](const Allocation& x, const Allocation& y) { return x.ptr < y.ptr; });
  for (size_t i = 1; i < live.size(); ++i) {
    const auto end = reinterpret_cast<uintptr_t>(live[i - 1].ptr) + live[i - 1].size;
    ASSERT_LE(end, reinterpret_cast<uintptr_t>(live[i].ptr));
  }
}

// One step of the random workload; the same seed gives the same calls on any device.
void random_step(CachingAllocator& a, std::vector<Allocation>& live, std::mt19937_64& rng) {
  const int op = int(rng() % 1000);
  if (op < 3) {
    a.empty_cache();
  } else if (op < 5) {
    a.mark("mark");
  } else if (live.empty() || op < 520) {
    const int stream = int(rng() % 8 == 0);
    const auto cat = Category(rng() % kNumCategories);
    CategoryScope scope(cat);
    LabelScope label(rng() % 2 ? "a" : "b");
    live.push_back(a.allocate(draw_size(rng), stream));
  } else {
    const size_t i = size_t(rng() % live.size());
    a.free(live[i]);
    live[i] = live.back();
    live.pop_back();
  }
}

TEST(AllocatorRandom, InvariantsHoldAfterEveryOperation) {
  // Host memory: real pointers, so the overlap check is about real addresses.
  CachingAllocator a(Device::cpu(), make_host_source());
  a.set_capacity(size_t(512) * MiB);  // low enough that retries and OOMs happen
  std::mt19937_64 rng(1234);
  std::vector<Allocation> live;
  int ooms = 0;
  for (int i = 0; i < 100'000; ++i) {
    try {
      random_step(a, live, rng);
    } catch (const OutOfMemory&) {
      ++ooms;
      // Free half of the live blocks, as a trainer would after reporting.
      for (size_t k = 0; k < live.size() / 2; ++k) a.free(live[k]);
      live.erase(live.begin(), live.begin() + long(live.size() / 2));
    }
    {
      check_invariants(a, live);
      check_no_overlap(live);
      if (HasFatalFailure()) FAIL() << "at operation " << i;
    }
  }
  EXPECT_EQ(a.stats().num_ooms, ooms);
  EXPECT_GT(a.stats().num_alloc_retries, 0);
  for (const Allocation& x : live) a.free(x);
  live.clear();
  check_invariants(a, live);
  a.empty_cache();
  const MemoryStats s = a.stats();
  EXPECT_EQ(s.allocated_bytes[kAllPools].current, 0);
  EXPECT_EQ(s.requested_bytes[kAllPools].current, 0);
  EXPECT_EQ(s.reserved_bytes[kAllPools].current, 0);
  EXPECT_EQ(s.segment[kAllPools].current, 0);
  EXPECT_EQ(s.num_segment_allocs, s.num_segment_frees);
  EXPECT_EQ(s.allocated_bytes[kAllPools].allocated, s.allocated_bytes[kAllPools].freed);
}

TEST(AllocatorRandom, HostAndMetaGiveIdenticalStatsSnapshotsAndTraces) {
  CachingAllocator host(Device::cpu(), make_host_source());
  CachingAllocator meta(Device::meta(), make_virtual_source());
  for (CachingAllocator* a : {&host, &meta}) {
    a->set_capacity(size_t(256) * MiB);
    a->set_trace_capacity(1 << 20);
  }
  std::mt19937_64 rng_host(99), rng_meta(99);
  std::vector<Allocation> live_host, live_meta;
  auto drive = [](CachingAllocator& a, std::vector<Allocation>& live, std::mt19937_64& rng) {
    for (int i = 0; i < 30'000; ++i) {
      try {
        random_step(a, live, rng);
      } catch (const OutOfMemory&) {
        for (const Allocation& x : live) a.free(x);
        live.clear();
      }
    }
  };
  drive(host, live_host, rng_host);
  drive(meta, live_meta, rng_meta);
  EXPECT_GT(host.stats().num_ooms, 0);
  EXPECT_EQ(host.stats(), meta.stats());
  const auto eh = host.events(), em = meta.events();
  ASSERT_EQ(eh.size(), em.size());
  for (size_t i = 0; i < eh.size(); ++i)
    ASSERT_TRUE(eh[i].same_as(em[i])) << "event " << i << ": " << event_kind_name(eh[i].kind)
                                      << " vs " << event_kind_name(em[i].kind);
  const MemorySnapshot sh = host.snapshot(), sm = meta.snapshot();
  ASSERT_EQ(sh.segments.size(), sm.segments.size());
  for (size_t i = 0; i < sh.segments.size(); ++i) {
    EXPECT_EQ(sh.segments[i].id, sm.segments[i].id);
    EXPECT_EQ(sh.segments[i].size, sm.segments[i].size);
    ASSERT_EQ(sh.segments[i].blocks.size(), sm.segments[i].blocks.size());
    for (size_t j = 0; j < sh.segments[i].blocks.size(); ++j) {
      const BlockInfo &x = sh.segments[i].blocks[j], &y = sm.segments[i].blocks[j];
      EXPECT_EQ(x.offset, y.offset);
      EXPECT_EQ(x.size, y.size);
      EXPECT_EQ(x.requested, y.requested);
      EXPECT_EQ(x.label, y.label);
    }
  }
  EXPECT_EQ(host.peak().allocated, meta.peak().allocated);
  EXPECT_EQ(host.peak().by_label, meta.peak().by_label);
  for (const Allocation& x : live_host) host.free(x);
  for (const Allocation& x : live_meta) meta.free(x);
}

}  // namespace
}  // namespace fitgrad
