// Storage::version (tensor/storage.h): each in-place front-end bumps it once, on the CPU and
// on meta alike (the autocast weight cache compares it, and must behave the same on both);
// reading ops and out-of-place results leave the source's version alone; a view shares it.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "tensor/ops/elementwise.h"
#include "tensor/ops/optim_update.h"
#include "tensor/ops/random.h"
#include "tensor/storage.h"
#include "tensor/tensor.h"

namespace fitgrad {
namespace {

struct Write {
  std::string name;
  std::function<void(Tensor& t)> run;  // writes t, shape (2, 3) f32, in place
};

std::vector<Write> writes() {
  const backend::AdamWScalars adamw{0, 0.9f, 0.1f, 0.999f, 0.001f, 1, 1e-8f, -1e-3f};
  const backend::SgdScalars sgd{0.1f, 0, 0, 1, false, true};
  auto like = [](const Tensor& t) { return Tensor::zeros(t.shape(), DType::f32, t.device()); };
  return {
      {"copy_", [&](Tensor& t) { t.copy_(like(t)); }},
      {"fill_", [](Tensor& t) { t.fill_(2.0); }},
      {"add_", [&](Tensor& t) { ops::add_(t, like(t)); }},
      {"adamw_update_",
       [=](Tensor& t) { ops::adamw_update_(t, like(t), like(t), like(t), adamw); }},
      {"sgd_update_", [=](Tensor& t) { ops::sgd_update_(t, like(t), Tensor(), sgd); }},
      {"scale_", [](Tensor& t) { ops::scale_(t, 0.5f); }},
      {"normal_",
       [](Tensor& t) {
         ops::normal_(t, RngState{1, 0}, 1.0);
       }},
  };
}

class StorageVersion : public ::testing::TestWithParam<Device> {};

TEST_P(StorageVersion, EachInPlaceWriteBumpsItOnce) {
  for (const Write& w : writes()) {
    Tensor t = Tensor::zeros({2, 3}, DType::f32, GetParam());
    const uint64_t before = t.storage()->version();
    w.run(t);
    EXPECT_EQ(t.storage()->version(), before + 1) << w.name;
  }
}

TEST_P(StorageVersion, ReadsAndNewTensorsLeaveItAlone) {
  Tensor t = Tensor::zeros({2, 3}, DType::f32, GetParam());
  const uint64_t before = t.storage()->version();
  const Tensor sum = ops::add(t, t), low = t.to(DType::bf16), copy = t.clone();
  EXPECT_EQ(t.storage()->version(), before);
  // A write through a view is a write to the viewed storage.
  Tensor row = t.narrow(0, 1, 1);
  row.fill_(1.0);
  EXPECT_EQ(t.storage()->version(), before + 1);
}

INSTANTIATE_TEST_SUITE_P(Devices, StorageVersion, ::testing::Values(Device::cpu(), Device::meta()),
                         [](const auto& info) { return info.param.str(); });

}  // namespace
}  // namespace fitgrad
