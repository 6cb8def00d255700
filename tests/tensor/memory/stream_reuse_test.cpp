// Note [Blocks other streams use] in tensor/memory/caching_allocator.h, on a source whose
// events the test completes by hand: a block another stream used is reused only after that
// stream's event is done; without record_stream, or for the block's own stream, reuse is
// immediate; the out-of-memory retry and empty_cache() wait for outstanding events; the
// allocated bytes drop at free() either way.
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "tensor/device_registry.h"
#include "tensor/memory/caching_allocator.h"
#include "tests/card.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad {
namespace {

// Virtual memory with streams: each event is recorded open and done only when the test says.
struct Events {
  std::map<uint64_t, int> stream_of;  // open events
  std::map<uint64_t, bool> done;
  int waits = 0, released = 0;
  uint64_t next = 1;
};

class StreamSource final : public RawSource {
 public:
  explicit StreamSource(std::shared_ptr<Events> events)
      : inner_(make_virtual_source()), events_(std::move(events)) {}
  void* allocate(size_t bytes) override { return inner_->allocate(bytes); }
  void release(void* ptr, size_t bytes) override { inner_->release(ptr, bytes); }
  bool has_bytes() const override { return false; }
  uint64_t record_event(int stream) override {
    const uint64_t id = events_->next++;
    events_->stream_of[id] = stream;
    events_->done[id] = false;
    return id;
  }
  bool event_done(uint64_t event) override { return events_->done.at(event); }
  void wait_event(uint64_t event) override {
    ++events_->waits;
    events_->done.at(event) = true;
  }
  void release_event(uint64_t event) override {
    ++events_->released;
    events_->done.erase(event);
    events_->stream_of.erase(event);
  }

 private:
  std::unique_ptr<RawSource> inner_;
  std::shared_ptr<Events> events_;
};

struct Fixture {
  std::shared_ptr<Events> events = std::make_shared<Events>();
  CachingAllocator alloc{Device::meta(), std::make_unique<StreamSource>(events)};
};

TEST(StreamReuse, ABlockAnotherStreamUsedWaitsForItsEvent) {
  Fixture f;
  const Allocation a = f.alloc.allocate(4096);
  f.alloc.record_stream(a, 1);
  f.alloc.free(a);
  EXPECT_EQ(f.alloc.stats().allocated_bytes[kAllPools].current, 0);  // freed for the ledger
  EXPECT_EQ(f.alloc.pending_blocks(), 1u);
  ASSERT_EQ(f.events->stream_of.size(), 1u);
  EXPECT_EQ(f.events->stream_of.begin()->second, 1);  // recorded on the stream that used it
  const Allocation b = f.alloc.allocate(4096);
  EXPECT_NE(b.ptr, a.ptr) << "reused while stream 1 may still use it";
  f.events->done.begin()->second = true;
  const Allocation c = f.alloc.allocate(4096);
  EXPECT_EQ(c.ptr, a.ptr);  // back in the pool, the best fit
  EXPECT_EQ(f.alloc.pending_blocks(), 0u);
  EXPECT_EQ(f.events->released, 1);
  f.alloc.free(b);
  f.alloc.free(c);
  EXPECT_EQ(f.alloc.snapshot().segments.size(), 1u);
  EXPECT_EQ(f.alloc.snapshot().segments[0].blocks.size(), 1u);  // merged whole again
}

TEST(StreamReuse, WithoutAnotherStreamABlockIsReusedAtOnce) {
  Fixture f;
  const Allocation a = f.alloc.allocate(4096);
  f.alloc.record_stream(a, 0);  // its own stream: nothing to wait for
  f.alloc.free(a);
  EXPECT_EQ(f.alloc.pending_blocks(), 0u);
  EXPECT_TRUE(f.events->stream_of.empty());
  const Allocation b = f.alloc.allocate(4096);
  EXPECT_EQ(b.ptr, a.ptr);
  f.alloc.free(b);
}

TEST(StreamReuse, TheOutOfMemoryRetryWaitsForTheOtherStreams) {
  Fixture f;
  f.alloc.set_capacity(kSmallBuffer);  // one small segment
  const Allocation a = f.alloc.allocate(kSmallSize);
  f.alloc.record_stream(a, 1);
  f.alloc.free(a);
  const Allocation b = f.alloc.allocate(kSmallSize);  // the segment's other half
  const Allocation c = f.alloc.allocate(kSmallSize);  // only a's block is left
  EXPECT_EQ(c.ptr, a.ptr);
  EXPECT_EQ(f.events->waits, 1);
  EXPECT_EQ(f.alloc.stats().num_alloc_retries, 1);
  EXPECT_EQ(f.alloc.stats().num_ooms, 0);
  f.alloc.free(b);
  f.alloc.free(c);
}

TEST(StreamReuse, EmptyCacheWaitsThenReleasesTheSegment) {
  Fixture f;
  const Allocation a = f.alloc.allocate(4096);
  f.alloc.record_stream(a, 3);
  f.alloc.free(a);
  EXPECT_EQ(f.alloc.stats().reserved_bytes[kAllPools].current, int64_t(kSmallBuffer));
  f.alloc.empty_cache();
  EXPECT_EQ(f.events->waits, 1);
  EXPECT_EQ(f.events->released, 1);
  EXPECT_EQ(f.alloc.stats().reserved_bytes[kAllPools].current, 0);
  EXPECT_EQ(f.alloc.pending_blocks(), 0u);
}

TEST(StreamReuse, StreamsOutsideTheRangeAreRefused) {
  Fixture f;
  const Allocation a = f.alloc.allocate(512);
  testing::expect_error([&] { f.alloc.record_stream(a, 64); }, "[memory]", "stream 64");
  f.alloc.free(a);
}

// On a GPU, through cudaMalloc's source: a block the copy stream (1) used comes back only
// once that stream's event is done; empty_cache() waits for it.
TEST(StreamReuse, CudaEventsGateReuseOnADevice) {
  FG_SKIP_WITHOUT_CARD();
  CachingAllocator& alloc = allocator_for(Device::cuda(0));
  const Allocation a = alloc.allocate(4096);
  alloc.record_stream(a, 1);
  alloc.free(a);
  EXPECT_EQ(alloc.pending_blocks(), 1u);
  alloc.empty_cache();
  EXPECT_EQ(alloc.pending_blocks(), 0u);
}

}  // namespace
}  // namespace fitgrad
