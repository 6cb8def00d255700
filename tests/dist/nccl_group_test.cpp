// The NCCL process group (dist/nccl_group.h) as one rank on cuda:0: world size 1 is still a
// real NCCL communicator, so every collective runs through NCCL on device memory, and with
// one rank each leaves its values as one process holds them (an average of one value is that
// value). Runs where a GPU is visible and the CUDA backend with NCCL is built; skipped
// elsewhere, where `make cuda-check` only compiles dist/nccl_group.cpp.
//
// A collective that does not end within the timeout is what a rank sees when its peer was
// stopped (the device check's fourth step, issue 46). NCCL refuses two ranks on one card
// ("Duplicate GPU detected"), and the lent machine has one, so the peer's silence is made
// here by holding the compute stream, after which the group's stream queues its collective,
// with a host function that outlasts the one-second timeout by four seconds: the wait must
// end with the --ddp_timeout error, the group refuse further use with that error, and its
// end neither crash nor hang (the communicator was aborted once and must not be destroyed:
// Note [One owner of the communicator] in dist/nccl_group.cpp). The collective is an average,
// for which NCCL launches a kernel even on one rank.
//
// An all-reduce dropped while it runs, as a failed step's are when its buckets end, aborts the
// communicator, so that the group's end does not wait for it (Note [Aborting a group] in
// dist/process_group.h): held the same way, the group ends within about a second, and refuses
// use before that with the reason.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "dist/rendezvous.h"
#include "tensor/device_registry.h"
#include "tensor/error.h"
#include "tests/card.h"
#include "tests/tensor/ops/op_harness.h"

#if FITGRAD_HAVE_CUDA
#include <cuda_runtime.h>

#include <thread>

#include "cuda/streams.h"
#endif

namespace fitgrad::dist {
namespace {

namespace fs = std::filesystem;

std::vector<double> values(const Tensor& t) {
  const Tensor host = t.to(Device::cpu()).to(DType::f32);
  return std::vector<double>(host.data<float>(), host.data<float>() + host.numel());
}

// A one-rank NCCL group on cuda:0 through a fresh file store named after `name`, removed at
// the end; `group` is null where the build has no NCCL (the reason in `why`).
struct OneRank {
  OneRank(const std::string& name, std::chrono::milliseconds timeout)
      : store(fs::temp_directory_path() / (name + std::to_string(::getpid()))) {
    fs::remove_all(store);
    fs::create_directories(store);
    DistEnv env;
    env.store = "file:" + store.string();
    env.hostname = "127.0.0.1";
    try {
      group = make_process_group(env, Device::cuda(0), timeout);
    } catch (const Error& e) {
      if (std::string(e.what()).find("this build has no NCCL") == std::string::npos) throw;
      why = e.what();
    }
  }
  ~OneRank() {
    group.reset();
    fs::remove_all(store);
  }
  fs::path store;
  std::unique_ptr<ProcessGroup> group;
  std::string why;
};

// Skips where the build has no NCCL, or fails under FITGRAD_REQUIRE_CUDA (Note [Card tests
// cannot pass by skipping] in tests/card.h).
#define SKIP_WITHOUT_NCCL(one)         \
  if ((one).group) {                   \
  } else if (testing::card_required()) \
    FAIL() << (one).why;               \
  else                                 \
    GTEST_SKIP() << (one).why

TEST(NcclGroup, OneRankRunsEveryCollectiveOnTheCard) {
  FG_SKIP_WITHOUT_CARD();
  OneRank one("dp_nccl_test_", std::chrono::seconds(60));
  SKIP_WITHOUT_NCCL(one);
  const std::unique_ptr<ProcessGroup>& group = one.group;
  const Device card = Device::cuda(0);
  EXPECT_EQ(group->backend(), "nccl");
  for (DType dtype : {DType::f32, DType::bf16}) {
    const std::vector<double> v = {1.5, -2.25, 3, 0.5, 8};
    const Tensor x = Tensor::from_vector(std::vector<float>(v.begin(), v.end()), {5}, DType::f32)
                         .to(dtype)
                         .to(card);
    group->all_reduce(x, ReduceOp::avg);
    EXPECT_EQ(values(x), v) << dtype_name(dtype);
    group->all_reduce(x, ReduceOp::sum);
    EXPECT_EQ(values(x), v) << dtype_name(dtype);
    const Tensor gathered = Tensor::zeros({5}, dtype, card);
    group->all_gather(x, gathered);
    EXPECT_EQ(values(gathered), v) << dtype_name(dtype);
    const Tensor scattered = Tensor::zeros({5}, dtype, card);
    group->reduce_scatter(x, scattered, ReduceOp::sum);
    EXPECT_EQ(values(scattered), v) << dtype_name(dtype);
    group->broadcast(x, 0);
    EXPECT_EQ(values(x), v) << dtype_name(dtype);
  }
  group->barrier();
}

#if FITGRAD_HAVE_CUDA
void sleep_five_seconds(void*) { std::this_thread::sleep_for(std::chrono::seconds(5)); }

// Holds cuda:0's compute stream for five seconds: the group's stream queues its collectives
// behind it, as behind a peer that has not arrived.
void hold_the_compute_stream() {
  ASSERT_EQ(
      cudaLaunchHostFunc(cuda::stream_of(0, cuda::kComputeStream), sleep_five_seconds, nullptr),
      cudaSuccess);
}
#endif

TEST(NcclGroup, ACollectivePastTheTimeoutEndsWithItsErrorAndTheGroupStillCloses) {
  FG_SKIP_WITHOUT_CARD();
#if FITGRAD_HAVE_CUDA
  OneRank one("dp_nccl_timeout_test_", std::chrono::seconds(1));
  SKIP_WITHOUT_NCCL(one);
  std::unique_ptr<ProcessGroup>& group = one.group;
  const Tensor x = Tensor::full({1000}, 1.0, DType::f32, Device::cuda(0));
  hold_the_compute_stream();
  const auto t0 = std::chrono::steady_clock::now();
  // avg, not sum: NCCL turns an in-place sum on one rank into no work, so the abort met an
  // idle communicator; an average launches a kernel (issue 57).
  testing::expect_error([&] { group->all_reduce_async(x, ReduceOp::avg)->wait(); },
                        "[dist] all_reduce of 1000 f32 elements on rank 0 of 1 timed out after 1 s",
                        "(--ddp_timeout)");
  // Ended by the timeout and the abort, not by the host function's end.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(4));
  testing::expect_error([&] { group->barrier(); }, "[dist] the NCCL communicator was aborted",
                        "timed out after 1 s");
  group.reset();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
#endif
}

TEST(NcclGroup, ADroppedRunningAllReduceDoesNotHoldUpTheGroupsEnd) {
  FG_SKIP_WITHOUT_CARD();
#if FITGRAD_HAVE_CUDA
  OneRank one("dp_nccl_dropped_test_", std::chrono::seconds(60));  // nothing may wait for it
  SKIP_WITHOUT_NCCL(one);
  std::unique_ptr<ProcessGroup>& group = one.group;
  const Tensor x = Tensor::full({1000}, 1.0, DType::f32, Device::cuda(0));
  hold_the_compute_stream();
  const auto t0 = std::chrono::steady_clock::now();
  group->all_reduce_async(x, ReduceOp::avg).reset();  // dropped behind the held stream
  testing::expect_error([&] { group->barrier(); }, "[dist] the NCCL communicator was aborted",
                        "all_reduce of 1000 f32 elements on rank 0 of 1 was dropped while it ran");
  group.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(2500));
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
#endif
}

}  // namespace
}  // namespace fitgrad::dist
