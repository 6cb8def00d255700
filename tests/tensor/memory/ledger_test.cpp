// The ledger: scope guards tag allocations, counts by category and label, the bounded
// trace with marks, the state at the peak, and concurrent use from several threads.
#include <gtest/gtest.h>

#include <thread>

#include "tensor/memory/caching_allocator.h"
#include "tensor/memory/scope.h"

namespace fitgrad {
namespace {

constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * 1024;

TEST(Ledger, ScopesComposeLabelsAndRestore) {
  EXPECT_EQ(current_memory_context().label, 0u);
  {
    LabelScope layer("layers.3");
    LabelScope mlp("mlp");
    {
      OpScope op("silu");
      CategoryScope cat(Category::activation);
      EXPECT_EQ(label_text(current_memory_context().label), "layers.3.mlp/silu");
      EXPECT_EQ(current_memory_context().category, Category::activation);
    }
    EXPECT_EQ(label_text(current_memory_context().label), "layers.3.mlp");
    EXPECT_EQ(current_memory_context().category, Category::other);
  }
  EXPECT_EQ(current_memory_context().label, 0u);
  EXPECT_EQ(intern_label("layers.3.mlp"), intern_label("layers.3.mlp"));
  EXPECT_NE(intern_label("layers.3.mlp"), intern_label("layers.3.attn"));
}

TEST(Ledger, CountsByCategoryAndLabel) {
  CachingAllocator a(Device::meta(), make_virtual_source());
  Allocation w, g, act;
  {
    CategoryScope c(Category::parameter);
    LabelScope l("fc.weight");
    w = a.allocate(3000);  // 3072
  }
  {
    CategoryScope c(Category::gradient);
    LabelScope l("fc.weight.grad");
    g = a.allocate(3000);
  }
  {
    CategoryScope c(Category::activation);
    LabelScope l("fc");
    act = a.allocate(2 * MiB);  // large pool, 2 MiB
  }
  const auto cats = a.by_category();
  EXPECT_EQ(cats[size_t(Category::parameter)].current, 3072);
  EXPECT_EQ(cats[size_t(Category::gradient)].current, 3072);
  EXPECT_EQ(cats[size_t(Category::activation)].current, int64_t(2 * MiB));
  const auto labels = a.by_label();
  ASSERT_EQ(labels.size(), 3u);
  EXPECT_EQ(label_text(labels[0].first), "fc");  // largest first
  EXPECT_EQ(labels[0].second, int64_t(2 * MiB));
  a.free(act);
  EXPECT_EQ(a.by_category()[size_t(Category::activation)].current, 0);
  EXPECT_EQ(a.by_category()[size_t(Category::activation)].peak, int64_t(2 * MiB));
  EXPECT_EQ(a.by_label().size(), 2u);
  a.free(w);
  a.free(g);
}

TEST(Ledger, PeakStateIsTheStateAtThePeak) {
  CachingAllocator a(Device::meta(), make_virtual_source());
  Allocation p, x, y;
  {
    CategoryScope c(Category::parameter);
    LabelScope l("w");
    p = a.allocate(4 * KiB);
  }
  a.mark("step 1 / forward");
  {
    CategoryScope c(Category::activation);
    LabelScope l("act1");
    x = a.allocate(8 * KiB);
    LabelScope l2("big");
    y = a.allocate(16 * KiB);  // label "act1.big"; peak: 28 KiB
  }
  a.mark("step 1 / backward");
  a.free(y);
  a.free(x);
  Allocation z = a.allocate(20 * KiB);  // 24 KiB: below the peak
  const PeakState peak = a.peak();
  EXPECT_EQ(peak.allocated, int64_t(28 * KiB));
  EXPECT_EQ(peak.reserved, int64_t(2 * MiB));
  EXPECT_EQ(label_text(peak.last_mark), "step 1 / forward");
  EXPECT_EQ(peak.by_category[size_t(Category::activation)], int64_t(24 * KiB));
  EXPECT_EQ(peak.by_category[size_t(Category::parameter)], int64_t(4 * KiB));
  EXPECT_EQ(peak.by_category[size_t(Category::other)], 0);
  ASSERT_EQ(peak.by_label.size(), 3u);
  EXPECT_EQ(label_text(peak.by_label[0].first), "act1.big");
  EXPECT_EQ(peak.by_label[0].second, int64_t(16 * KiB));
  // A new, higher peak replaces it and is visible before any free.
  Allocation big = a.allocate(MiB);
  EXPECT_EQ(a.peak().allocated, int64_t(4 * KiB + 20 * KiB + MiB));
  EXPECT_EQ(a.peak().by_category[size_t(Category::other)], int64_t(20 * KiB + MiB));
  a.free(big);
  a.free(z);
  a.free(p);
  a.reset_peak_stats();
  EXPECT_EQ(a.peak().allocated, 0);
  EXPECT_EQ(a.stats().allocated_bytes[kAllPools].peak, 0);
}

TEST(Ledger, TraceIsABoundedRingWithMarks) {
  CachingAllocator a(Device::meta(), make_virtual_source());
  a.set_trace_capacity(8);
  a.mark("start");                 // event 0
  Allocation x = a.allocate(100);  // 1: segment_alloc, 2: alloc
  a.free(x);                       // 3
  for (int i = 0; i < 8; ++i) {    // 4..19
    Allocation y = a.allocate(100);
    a.free(y);
  }
  a.mark("end");  // 20
  EXPECT_EQ(a.total_events(), 21u);
  const auto ev = a.events();
  ASSERT_EQ(ev.size(), 8u);
  EXPECT_EQ(ev.front().seq, 13u);
  EXPECT_EQ(ev.back().kind, EventKind::mark);
  EXPECT_EQ(label_text(ev.back().label), "end");
  for (size_t i = 1; i < ev.size(); ++i) EXPECT_EQ(ev[i].seq, ev[i - 1].seq + 1);
  // Events carry their totals: an alloc of 512 B after a free leaves 512 B allocated.
  for (const MemoryEvent& e : ev) {
    if (e.kind == EventKind::alloc) {
      EXPECT_EQ(e.allocated_after, 512);
    } else if (e.kind == EventKind::free) {
      EXPECT_EQ(e.allocated_after, 0);
    }
    EXPECT_EQ(e.reserved_after, int64_t(2 * MiB));
  }
}

TEST(Ledger, ConcurrentThreadsKeepExactTotals) {
  CachingAllocator a(Device::cpu(), make_host_source());
  constexpr int kThreads = 4, kIters = 20'000;
  auto work = [&](int t) {
    CategoryScope c(Category(t % kNumCategories));
    LabelScope l(fmt::format("worker{}", t));
    std::vector<Allocation> mine;
    for (int i = 0; i < kIters; ++i) {
      mine.push_back(a.allocate(size_t(512 * (1 + (i * 7 + t) % 64))));
      if (mine.size() > 16) {
        a.free(mine.front());
        mine.erase(mine.begin());
      }
    }
    for (const Allocation& x : mine) a.free(x);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(work, t);
  for (auto& th : threads) th.join();
  const MemoryStats s = a.stats();
  EXPECT_EQ(s.allocated_bytes[kAllPools].current, 0);
  EXPECT_EQ(s.allocation[kAllPools].allocated, kThreads * kIters);
  int64_t expected_bytes = 0;
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kIters; ++i) expected_bytes += 512 * (1 + (i * 7 + t) % 64);
  EXPECT_EQ(s.allocated_bytes[kAllPools].allocated, expected_bytes);
  for (const auto& c : a.by_category()) EXPECT_EQ(c.current, 0);
  EXPECT_TRUE(a.by_label().empty());
}

}  // namespace
}  // namespace fitgrad
