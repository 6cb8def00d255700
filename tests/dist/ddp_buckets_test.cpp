// DDP's gradient buckets (dist/ddp.h) through a fake process group whose Work, as NCCL's does,
// is the only holder of the bucket it reduces and never completes: after an exception in the
// step, disarm() keeps the all-reduces in flight, and so their buffers, alive (Note [Orphaned
// all-reduces] in dist/ddp.cpp); dropping them would hand bytes the card may still write to
// the next tensor (issue 46).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "dist/ddp.h"
#include "tensor/error.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::dist {
namespace {

// A collective that is still running: it holds its tensor, and waiting for it is an error.
class PendingWork final : public Work {
 public:
  explicit PendingWork(Tensor buffer) : buffer_(std::move(buffer)) {}
  void wait() override { throw Error("[test] this collective never ends"); }

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
  std::vector<std::weak_ptr<Work>> handed_out;
};

TEST(DdpBuckets, DisarmKeepsTheAllReducesInFlightAndTheirBuffers) {
  PendingGroup group;
  Tensor a = testing::random_tensor({64}, 1), b = testing::random_tensor({64}, 2);
  autograd::set_requires_grad(a);
  autograd::set_requires_grad(b);
  // Buckets of 256 bytes: one parameter each, both launched during the backward.
  GradBuckets buckets(group, {{"a", a}, {"b", b}},
                      {.bucket_cap_bytes = 256, .first_bucket_bytes = 256});
  ASSERT_EQ(buckets.num_buckets(), 2u);
  buckets.arm();
  const Tensor x = testing::random_tensor({64}, 3);
  autograd::backward(
      autograd::add(autograd::sum(autograd::mul(a, x)), autograd::sum(autograd::mul(b, x))));
  ASSERT_EQ(group.handed_out.size(), 2u);  // both buckets' all-reduces are in flight
  buckets.disarm();                        // as after an exception before finish()
  EXPECT_EQ(buckets.orphaned_works(), 2u);
  for (const auto& work : group.handed_out) EXPECT_FALSE(work.expired());
}

}  // namespace
}  // namespace fitgrad::dist
