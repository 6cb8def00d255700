// The NCCL process group (dist/nccl_group.h) as one rank on cuda:0: world size 1 is still a
// real NCCL communicator, so every collective runs through NCCL on device memory, and with
// one rank each leaves its values as one process holds them (an average of one value is that
// value). Runs where a GPU is visible and the CUDA backend with NCCL is built; skipped
// elsewhere, where `make cuda-check` only compiles dist/nccl_group.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "dist/rendezvous.h"
#include "tensor/device_registry.h"
#include "tensor/error.h"

namespace fitgrad::dist {
namespace {

namespace fs = std::filesystem;

std::vector<double> values(const Tensor& t) {
  const Tensor host = t.to(Device::cpu()).to(DType::f32);
  return std::vector<double>(host.data<float>(), host.data<float>() + host.numel());
}

TEST(NcclGroup, OneRankRunsEveryCollectiveOnTheCard) {
  if (usable_device_count(DeviceType::cuda) == 0)
    GTEST_SKIP() << "no usable CUDA device (built without CUDA, or no GPU or driver visible)";
  const fs::path store = fs::temp_directory_path() / ("dp_nccl_test_" + std::to_string(::getpid()));
  fs::remove_all(store);
  fs::create_directories(store);
  DistEnv env;
  env.store = "file:" + store.string();
  env.hostname = "127.0.0.1";
  const Device card = Device::cuda(0);
  std::unique_ptr<ProcessGroup> group;
  try {
    group = make_process_group(env, card, std::chrono::seconds(60));
  } catch (const Error& e) {
    if (std::string(e.what()).find("this build has no NCCL") == std::string::npos) throw;
    GTEST_SKIP() << e.what();
  }
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
  fs::remove_all(store);
}

}  // namespace
}  // namespace fitgrad::dist
