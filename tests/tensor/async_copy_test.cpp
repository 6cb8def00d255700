// AsyncCopy on the CPU (Note [Copies retired in program order] in tensor/async_copy.h): the
// destination is poison until wait() and the source's bytes are read only then, as late as
// a copy stream could read them; the copy holds its source until wait(); misuse is refused.
#include "tensor/async_copy.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tensor/storage.h"

namespace fitgrad {
namespace {

const Device kFar{DeviceType::cpu, 1};

TEST(AsyncCopy, TheDestinationHoldsTheSourceOnlyAfterWait) {
  const Tensor src = Tensor::arange(6).reshape({2, 3});
  const Tensor dst = Tensor::empty({2, 3}, DType::f32, kFar);
  AsyncCopy copy(dst, src);
  EXPECT_TRUE(copy.in_flight());
  for (float x : dst.to_vector<float>()) EXPECT_TRUE(std::isnan(x)) << "read before wait()";
  // A write to the source before wait() is what a copy stream might still read: visible.
  src.data<float>()[0] = 42.f;
  const Tensor got = copy.wait();
  EXPECT_FALSE(copy.in_flight());
  EXPECT_EQ(got.device(), kFar);
  EXPECT_EQ(got.to_vector<float>(), (std::vector<float>{42, 1, 2, 3, 4, 5}));
  EXPECT_THROW(copy.wait(), Error);
}

TEST(AsyncCopy, TheCopyHoldsItsSourceUntilWait) {
  CachingAllocator& cpu = allocator_for(Device::cpu());
  const int64_t before = cpu.stats().allocated_bytes[kAllPools].current;
  Tensor dst = Tensor::empty({1024}, DType::f32, kFar);
  std::optional<AsyncCopy> copy;
  {
    const Tensor src = Tensor::arange(1024);
    copy.emplace(dst, src);
  }
  EXPECT_EQ(cpu.stats().allocated_bytes[kAllPools].current - before, 4096);
  copy->wait();
  EXPECT_EQ(cpu.stats().allocated_bytes[kAllPools].current, before);
  EXPECT_EQ(dst.to_vector<float>()[1023], 1023.f);
}

TEST(AsyncCopy, FarMemoryHasItsOwnLedger) {
  CachingAllocator& far = allocator_for(kFar);
  const int64_t before = far.stats().allocated_bytes[kAllPools].current;
  const Tensor dst = Tensor::empty({256}, DType::bf16, kFar);
  EXPECT_EQ(far.stats().allocated_bytes[kAllPools].current - before, 512);
  EXPECT_EQ(kFar.str(), "cpu:1");
}

TEST(AsyncCopy, RefusesCopiesItCannotMake) {
  const Tensor a = Tensor::zeros({2, 3});
  auto message = [](auto&& make) {
    try {
      make();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] {
              AsyncCopy(Tensor::empty({3, 2}, DType::f32, kFar), a);
            }).find("one shape and dtype"),
            std::string::npos);
  EXPECT_NE(message([&] {
              AsyncCopy(Tensor::empty({2, 3}, DType::bf16, kFar), a);
            }).find("one shape and dtype"),
            std::string::npos);
  EXPECT_NE(message([&] {
              AsyncCopy(Tensor::empty({3, 2}, DType::f32, kFar), a.transpose(0, 1));
            }).find("contiguous"),
            std::string::npos);
  EXPECT_NE(message([&] {
              AsyncCopy(Tensor::empty({2, 3}, DType::f32, Device::meta()), a);
            }).find("bytes on one side only"),
            std::string::npos);
}

TEST(AsyncCopy, AMetaCopyAllocatesAndMovesNothing) {
  const Tensor src = Tensor::empty({4}, DType::f32, Device::meta());
  AsyncCopy copy(Tensor::empty({4}, DType::f32, Device{DeviceType::meta, 1}), src);
  EXPECT_EQ(copy.wait().device(), (Device{DeviceType::meta, 1}));
}

}  // namespace
}  // namespace fitgrad
