// A card's first use in a fresh process (issue 46; the device check's third and fifth steps):
// what happens only before the CUDA runtime has done anything in the process, so each case
// runs in a child process of its own (this binary again, filtered to the case, with
// FITGRAD_FIRST_USE_CHILD set) and its parent holds the child to a pass.
//   - The device error records are made by the first kernel that checks an index. They must
//     be zeroed on the compute stream, ordered before that kernel: zeroed on the legacy
//     default stream behind a busy host function, a bad id recorded by the very first call was
//     wiped after it and never reported.
//   - The first allocation may be an expandable segment: the virtual-memory reservation then
//     comes before the runtime has made any context (Note [Expandable device memory] in
//     cuda/raw_sources.cpp).
// Both skip without a usable GPU; the children skip unless their parent started them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tensor/device_copy.h"
#include "tensor/device_registry.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/ops/embedding.h"
#include "tests/card.h"
#include "tests/run_self.h"
#include "tests/tensor/ops/op_harness.h"

#if FITGRAD_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime.h>
#endif

namespace fitgrad::testing {
namespace {

using ::testing::HasSubstr;

constexpr const char* kChildVariable = "FITGRAD_FIRST_USE_CHILD";

bool in_child() { return std::getenv(kChildVariable) != nullptr; }

// Runs CudaFirstUse.<test> alone in a fresh process of this binary; its exit code and output.
std::pair<int, std::string> run_child(const std::string& test) {
  return run_self(std::string(kChildVariable) + "=1", "CudaFirstUse." + test);
}

void expect_child_passes(const std::string& test) {
  const auto [rc, log] = run_child(test);
  EXPECT_EQ(rc, 0) << log;
  EXPECT_THAT(log, HasSubstr("[  PASSED  ] 1 test")) << log;
}

#define SKIP_UNLESS_THE_CHILD(parent) \
  if (!in_child()) GTEST_SKIP() << "runs in a fresh process started by CudaFirstUse." parent

TEST(CudaFirstUse, ABadIdInTheFirstIndexCheckingCallIsReported) {
  FG_SKIP_WITHOUT_CARD();
  expect_child_passes("ChildBadIdBehindABusyLegacyStream");
}

TEST(CudaFirstUse, TheFirstAllocationCanBeAnExpandableSegment) {
  FG_SKIP_WITHOUT_CARD();
  expect_child_passes("ChildFirstAllocationExpandable");
}

#if FITGRAD_HAVE_CUDA
void sleep_half_a_second(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(500)); }
#endif

// An embedding of 5 rows asked for id 5, the process's first index-checking kernel, while
// the legacy stream is held for half a second by a host function: the record must survive
// until the check, after the whole device (legacy stream included) is idle.
TEST(CudaFirstUse, ChildBadIdBehindABusyLegacyStream) {
  SKIP_UNLESS_THE_CHILD("ABadIdInTheFirstIndexCheckingCallIsReported");
#if FITGRAD_HAVE_CUDA
  const Device cuda = Device::cuda(0);
  const Tensor weight = random_tensor({5, 3}, 1).to(cuda);
  const Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 5, 2}, {3}, DType::i64).to(cuda);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(cudaStreamLegacy, sleep_half_a_second, nullptr), cudaSuccess);
  const Tensor rows = ops::embedding(weight, ids);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  expect_error([&] { check_device_errors(cuda); }, "[embedding] 1 ids out of range [0, 5)",
               "one was 5");
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

// No context exists yet (the child has made no runtime call); the allocator is put in the
// expandable mode and the first allocation, a 12 MiB upload, maps granules into a reserved
// range; the bytes come back as they went.
TEST(CudaFirstUse, ChildFirstAllocationExpandable) {
  SKIP_UNLESS_THE_CHILD("TheFirstAllocationCanBeAnExpandableSegment");
#if FITGRAD_HAVE_CUDA
  CUcontext context = nullptr;
  const CUresult r = cuCtxGetCurrent(&context);
  ASSERT_TRUE(r == CUDA_ERROR_NOT_INITIALIZED || (r == CUDA_SUCCESS && context == nullptr))
      << "a context was current before the first allocation";
  const Device cuda = Device::cuda(0);
  CachingAllocator& alloc = allocator_for(cuda);
  alloc.set_mode(AllocatorMode::expandable);
  const Tensor host = random_tensor({3, 1 << 20}, 9);
  const Tensor card = host.to(cuda);
  EXPECT_GT(alloc.stats().num_segment_maps, 0);
  EXPECT_EQ(to_f64(card), to_f64(host));
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

}  // namespace
}  // namespace fitgrad::testing
