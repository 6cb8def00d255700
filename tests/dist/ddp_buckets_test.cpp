// DDP's gradient buckets (dist/ddp.h) through a fake process group whose Work, as NCCL's does,
// is the only holder of the bucket it reduces and never completes: after an exception in the
// step, disarm() keeps the all-reduces in flight, and so their buffers, alive (Note [Orphaned
// all-reduces] in dist/ddp.cpp); dropping them would hand bytes the card may still write to
// the next tensor (issue 46). When the buckets end with such an all-reduce still pending they
// abort the group, so that a failed rank's exit waits for no peer (Note [Aborting a group] in
// dist/process_group.h, issue 57): through the fake group, and through two Gloo ranks where one
// never joins its peer's all-reduces.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "dist/ddp.h"
#include "dist/gloo_group.h"
#include "tensor/error.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::dist {
namespace {

// A collective that is still running: it holds its tensor, and waiting for it is an error.
class PendingWork final : public Work {
 public:
  explicit PendingWork(Tensor buffer) : buffer_(std::move(buffer)) {}
  void wait() override { throw Error("[test] this collective never ends"); }
  bool done() override { return false; }

 private:
  Tensor buffer_;
};

// One rank whose all-reduces never end; it remembers every Work it handed out.
class PendingGroup final : public ProcessGroup {
 public:
  PendingGroup() : ProcessGroup(0, 2, std::chrono::milliseconds(1000)) {}
  std::string backend() const override { return "pending"; }
  std::shared_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp) override {
    auto work = std::make_shared<PendingWork>(t);
    handed_out.push_back(work);
    return work;
  }
  void reduce_scatter(const Tensor&, const Tensor&, ReduceOp) override {}
  void all_gather(const Tensor&, const Tensor&) override {}
  void broadcast(const Tensor&, int) override {}
  void barrier() override {}
  void abort(const std::string& why) override { aborted = why; }
  std::vector<std::weak_ptr<Work>> handed_out;
  std::string aborted;
};

// `n` trained parameters of 64 f32 elements, named a, b, ...
std::vector<std::pair<std::string, Tensor>> parameters(int n) {
  std::vector<std::pair<std::string, Tensor>> named;
  for (int k = 0; k < n; ++k) {
    Tensor p = testing::random_tensor({64}, uint64_t(1 + k));
    autograd::set_requires_grad(p);
    named.emplace_back(std::string(1, char('a' + k)), p);
  }
  return named;
}

// Buckets of 256 bytes: one parameter each.
constexpr DdpOptions kOneParameterABucket{.bucket_cap_bytes = 256, .first_bucket_bytes = 256};

// A backward over `params`: every bucket's all-reduce is launched during it.
void backward_over(const std::vector<std::pair<std::string, Tensor>>& params) {
  const Tensor x = testing::random_tensor({64}, 100);
  Tensor loss;
  for (const auto& [name, p] : params) {
    const Tensor term = autograd::sum(autograd::mul(p, x));
    loss = loss.defined() ? autograd::add(loss, term) : term;
  }
  autograd::backward(loss);
}

TEST(DdpBuckets, DisarmKeepsTheAllReducesInFlightAndTheirBuffers) {
  PendingGroup group;
  const auto params = parameters(2);
  GradBuckets buckets(group, params, kOneParameterABucket);
  ASSERT_EQ(buckets.num_buckets(), 2u);
  buckets.arm();
  backward_over(params);
  ASSERT_EQ(group.handed_out.size(), 2u);  // both buckets' all-reduces are in flight
  buckets.disarm();                        // as after an exception before finish()
  EXPECT_EQ(buckets.orphaned_works(), 2u);
  for (const auto& work : group.handed_out) EXPECT_FALSE(work.expired());
}

TEST(DdpBuckets, BucketsThatEndWithAPendingAllReduceAbortTheGroup) {
  PendingGroup group;
  const auto params = parameters(2);
  {
    GradBuckets buckets(group, params, kOneParameterABucket);
    buckets.arm();
    backward_over(params);
    buckets.disarm();
    EXPECT_EQ(group.aborted, "");  // kept, not yet aborted: the step may be retried
  }
  EXPECT_THAT(group.aborted, ::testing::HasSubstr("[ddp] a failed step left 2 all-reduce(s) in "
                                                  "flight when its buckets ended"));
}

// Rank 1 launches two all-reduces (kBucketsInFlight) that rank 0 never joins, as after rank
// 1's step failed while rank 0 was elsewhere. Its buckets, then its group, end within one
// timeout (the running all-reduce's; Gloo cannot cancel it) instead of one timeout per queued
// all-reduce, and the group refuses use after its buckets aborted it.
TEST(DdpBuckets, AFailedRanksPendingAllReducesDoNotHoldUpItsEnd) {
  namespace fs = std::filesystem;
  const fs::path store = fs::temp_directory_path() / ("dp_ddp_abort_" + std::to_string(::getpid()));
  fs::remove_all(store);
  fs::create_directories(store);
  const auto timeout = std::chrono::milliseconds(1500);
  std::atomic<bool> rank1_done{false};
  std::chrono::steady_clock::duration end_took{};
  std::string refused;
  std::thread rank0([&] {
    auto group = make_gloo_group({0, 2, "file:" + store.string(), "127.0.0.1", timeout, ""});
    while (!rank1_done) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  });
  {
    auto group = make_gloo_group({1, 2, "file:" + store.string(), "127.0.0.1", timeout, ""});
    const auto params = parameters(2);
    auto buckets = std::make_unique<GradBuckets>(*group, params, kOneParameterABucket);
    EXPECT_EQ(buckets->num_buckets(), 2u);
    buckets->arm();
    backward_over(params);
    buckets->disarm();  // as after an exception before finish()
    const auto t0 = std::chrono::steady_clock::now();
    buckets.reset();
    try {
      group->barrier();
    } catch (const Error& e) {
      refused = e.what();
    }
    group.reset();
    end_took = std::chrono::steady_clock::now() - t0;
  }
  rank1_done = true;
  rank0.join();
  fs::remove_all(store);
  // One failed collective costs its timeout and then the naming of the peer behind it (Note
  // [Naming the failed peer] in dist/gloo_group.cpp: up to a second looking for a gone
  // process, 2 s waiting for the peers' marks): about 4.6 s here. The two, one after the
  // other, cost twice that (9-11 s).
  EXPECT_LT(end_took, timeout + std::chrono::milliseconds(4500));
  EXPECT_THAT(refused, ::testing::HasSubstr("[dist] the Gloo group was aborted: [ddp] a failed "
                                            "step left 2 all-reduce(s) in flight"));
}

}  // namespace
}  // namespace fitgrad::dist
