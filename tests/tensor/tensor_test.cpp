// Tensor creation, properties, element access, copies, printing, meta tensors and the
// device memcpy hook. The hook is exercised in a child process (a death test) with a
// fake "cuda" source backed by host memory, so the registration never leaks into the
// rest of the suite.
#include "tensor/tensor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>

#include "tensor/device_copy.h"
#include "tensor/memory/caching_allocator.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using fitgrad::testing::error_of;

TEST(TensorTest, CreationShapesStridesAndValues) {
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor e = Tensor::empty({2, 3, 4}, dt);
    EXPECT_EQ(e.shape(), (Shape{2, 3, 4}));
    EXPECT_EQ(e.strides(), (Strides{12, 4, 1}));
    EXPECT_EQ(e.offset(), 0);
    EXPECT_EQ(e.dtype(), dt);
    EXPECT_EQ(e.device(), Device::cpu());
    EXPECT_EQ(e.numel(), 24);
    EXPECT_EQ(e.dim(), 3);
    EXPECT_EQ(e.nbytes(), 24 * element_size(dt));
    EXPECT_TRUE(e.is_contiguous());
    EXPECT_EQ(Tensor::zeros({5}, dt).to_vector<double>(), std::vector<double>(5, 0.0));
    EXPECT_EQ(Tensor::full({2, 2}, 7, dt).to_vector<double>(), std::vector<double>(4, 7.0));
    EXPECT_EQ(Tensor::arange(6, dt).to_vector<double>(), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  }
  EXPECT_EQ(Tensor::zeros({}).dim(), 0);
  EXPECT_EQ(Tensor::zeros({}).numel(), 1);
  EXPECT_THAT(error_of([] { Tensor::arange(-1); }), HasSubstr("[arange]"));
  EXPECT_THAT(error_of([] { Tensor::empty({2, -1}); }), HasSubstr("negative"));
}

TEST(TensorTest, PropertiesOfAView) {
  const Tensor t = Tensor::arange(24, DType::i64).view({2, 3, 4});
  const Tensor v = t.slice(1, 1, 3).transpose(0, 2);  // (4, 2, 2)
  EXPECT_EQ(v.size(-1), 2);
  EXPECT_EQ(v.size(0), 4);
  EXPECT_EQ(v.stride(-1), 12);
  EXPECT_EQ(v.offset(), 4);
  EXPECT_EQ(v.nbytes(), 16 * sizeof(int64_t));
  EXPECT_EQ(v.data_ptr(), static_cast<char*>(t.storage()->data()) + 4 * sizeof(int64_t));
  EXPECT_EQ(*v.data<int64_t>(), 4);
  EXPECT_TRUE(v.shares_storage_with(t));
  EXPECT_FALSE(v.same(t));
  EXPECT_FALSE(Tensor::zeros({1}).shares_storage_with(t));
}

TEST(TensorTest, ElementAccess) {
  Tensor t = Tensor::zeros({2, 3}, DType::i32);
  t.set({1, -1}, 2.7);  // converts: truncation toward zero
  t.set({-2, 0}, -3.5);
  EXPECT_EQ(t.at({1, 2}), 2);
  EXPECT_EQ(t.at({0, 0}), -3);
  EXPECT_EQ(t.to_vector<int32_t>(), (std::vector<int32_t>{-3, 0, 0, 0, 0, 2}));
  EXPECT_EQ(Tensor::full({1, 1}, 0.25, DType::f16).item(), 0.25);
  EXPECT_EQ(Tensor::full({}, -4, DType::i8).item(), -4);
}

TEST(TensorTest, CopiesAndIdentity) {
  const Tensor t = Tensor::arange(6).view({2, 3});
  EXPECT_TRUE(t.contiguous().same(t));
  EXPECT_TRUE(t.to(DType::f32).same(t));
  EXPECT_TRUE(t.to(Device::cpu()).same(t));
  Tensor c = t.clone();
  EXPECT_FALSE(c.shares_storage_with(t));
  c.fill_(1);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  const Tensor h = t.to(DType::f16);
  EXPECT_FALSE(h.shares_storage_with(t));
  EXPECT_EQ(h.dtype(), DType::f16);
  EXPECT_EQ(h.to_vector<float>(), t.to_vector<float>());
  // A copy of a Tensor handle aliases the same tensor.
  Tensor alias = t;
  alias.set({0, 0}, 9);
  EXPECT_EQ(t.at({0, 0}), 9);
}

TEST(TensorTest, UndefinedTensorThrows) {
  const Tensor u;
  EXPECT_FALSE(u.defined());
  EXPECT_THAT(error_of([&] { u.shape(); }), HasSubstr("[tensor] use of an undefined tensor"));
  EXPECT_THAT(error_of([&] { u.clone(); }), HasSubstr("undefined"));
  EXPECT_EQ(u.str(), "tensor(undefined)");
}

TEST(TensorPrint, SmallTensorsInFull) {
  EXPECT_EQ(Tensor::arange(4).view({2, 2}).str(),
            "tensor([[0.0000, 1.0000],\n"
            "        [2.0000, 3.0000]], shape=(2, 2), dtype=f32, device=cpu)");
  EXPECT_EQ(Tensor::arange(8, DType::i64).view({2, 2, 2}).str(),
            "tensor([[[0, 1],\n"
            "         [2, 3]],\n"
            "\n"
            "        [[4, 5],\n"
            "         [6, 7]]], shape=(2, 2, 2), dtype=i64, device=cpu)");
  EXPECT_EQ(Tensor::from_vector<float>({1, 100, -2.5f}, {3}, DType::bf16).str(),
            "tensor([  1.0000, 100.0000,  -2.5000], shape=(3), dtype=bf16, device=cpu)");
  EXPECT_EQ(Tensor::full({}, 3.5).str(), "tensor(3.5000, shape=(), dtype=f32, device=cpu)");
  EXPECT_EQ(Tensor::from_vector<float>({1e9f, 1}, {2}).str(),
            "tensor([1.0000e+09, 1.0000e+00], shape=(2), dtype=f32, device=cpu)");
  // A strided view prints its own elements.
  EXPECT_EQ(Tensor::arange(6, DType::u8).view({2, 3}).transpose(0, 1).str(),
            "tensor([[0, 3],\n"
            "        [1, 4],\n"
            "        [2, 5]], shape=(3, 2), dtype=u8, device=cpu)");
  std::ostringstream os;
  const Tensor t = Tensor::arange(3, DType::i8);
  os << t;
  EXPECT_EQ(os.str(), t.str());
}

TEST(TensorPrint, LargeTensorsAreAbridged) {
  const std::string s = Tensor::arange(2000, DType::i32).str();
  EXPECT_EQ(s,
            "tensor([   0,    1,    2, ..., 1997, 1998, 1999], shape=(2000), dtype=i32, "
            "device=cpu)");
  const std::string m = Tensor::arange(40 * 50, DType::i32).view({40, 50}).str();
  EXPECT_THAT(m, HasSubstr("tensor([[   0,    1,    2, ...,   47,   48,   49],\n"
                           "        [  50,   51,   52, ...,   97,   98,   99],\n"));
  EXPECT_THAT(m, HasSubstr("        ...,\n"));
  EXPECT_THAT(m, HasSubstr("[1950, 1951, 1952, ..., 1997, 1998, 1999]], shape=(40, 50)"));
  EXPECT_THAT(m, Not(HasSubstr("150")));
}

size_t meta_allocated() {
  return size_t(allocator_for(Device::meta()).stats().allocated_bytes[kAllPools].current);
}

TEST(TensorMeta, AllocatesButHasNoData) {
  const size_t before = meta_allocated();
  {
    Tensor m = Tensor::empty({1000, 1000}, DType::f32, Device::meta());
    EXPECT_EQ(meta_allocated() - before, round_request(4'000'000));
    EXPECT_EQ(m.device(), Device::meta());
    EXPECT_EQ(m.storage()->nbytes(), 4'000'000u);
    // Shape logic works; copies and fills do nothing.
    EXPECT_EQ(m.transpose(0, 1).slice(0, 0, 10).shape(), (Shape{10, 1000}));
    m.fill_(1);
    m.copy_(Tensor::zeros({1000}));
    EXPECT_NO_THROW(m.slice(1, 0, 3).copy_(Tensor::zeros({1000, 3}, DType::bf16, Device::meta())));
    // Conversions and clones allocate like the real run would.
    const size_t mid = meta_allocated();
    const Tensor h = m.to(DType::bf16);
    const Tensor z = Tensor::zeros({64}, DType::i64, Device::meta());
    EXPECT_EQ(h.dtype(), DType::bf16);
    EXPECT_EQ(meta_allocated() - mid, round_request(2'000'000) + round_request(512));
    EXPECT_THAT(m.str(), HasSubstr("tensor(..., shape=(1000, 1000), dtype=f32, device=meta)"));
    EXPECT_THAT(error_of([&] { m.data_ptr(); }), HasSubstr("[data_ptr] meta tensors have no data"));
    EXPECT_THAT(error_of([&] { m.at({0, 0}); }), HasSubstr("[at] meta tensors have no data"));
    EXPECT_THAT(error_of([&] { m.set({0, 0}, 1); }), HasSubstr("[set] meta tensors have no data"));
    EXPECT_THAT(error_of([&] { z.slice(0, 0, 1).item(); }), HasSubstr("[item] meta"));
    EXPECT_THAT(error_of([&] { m.to_vector<float>(); }), HasSubstr("[to_vector] meta"));
    EXPECT_THAT(error_of([&] { m.to(Device::cpu()); }),
                HasSubstr("[to] a meta tensor of shape (1000, 1000) has no data to copy to cpu"));
    EXPECT_THAT(error_of([&] { Tensor::zeros({2}).copy_(z.slice(0, 0, 2)); }),
                HasSubstr("[copy_] a meta tensor has no data"));
  }
  EXPECT_EQ(meta_allocated(), before);
  // cpu -> meta allocates on meta and leaves the cpu tensor alone.
  const Tensor c = Tensor::arange(300, DType::i32);
  const Tensor m = c.to(Device::meta());
  EXPECT_EQ(m.device(), Device::meta());
  EXPECT_EQ(m.shape(), c.shape());
  EXPECT_EQ(meta_allocated() - before, round_request(1200));
  EXPECT_EQ(Tensor::arange(10, DType::f32, Device::meta()).device(), Device::meta());
  EXPECT_EQ(Tensor::from_vector<float>({1, 2}, {2}, Device::meta()).device(), Device::meta());
}

TEST(TensorDevice, CudaWithoutABackendIsNotAvailable) {
  if (find_device_memcpy(DeviceType::cuda) != nullptr) GTEST_SKIP() << "a cuda backend is present";
  const Tensor t = Tensor::arange(4);
  EXPECT_THAT(error_of([&] { t.to(Device::cuda()); }),
              HasSubstr("[to] cuda:0 is not available: fitgrad was built without CUDA"));
  EXPECT_THAT(error_of([&] { t.to(Device::cuda(1)); }), HasSubstr("[to] cuda:1 is not available"));
}

// ---- the device hook, in a child process ----

// Host memory posing as a device.
class FakeDeviceSource final : public RawSource {
 public:
  void* allocate(size_t bytes) override { return std::aligned_alloc(4096, bytes); }
  void release(void* ptr, size_t) override { std::free(ptr); }
};

struct MemcpyCall {
  Device dst;
  Device src;
  size_t bytes;
};
std::vector<MemcpyCall>* g_calls = nullptr;

#define DEVICE_CHECK(cond)                                                              \
  do {                                                                                  \
    if (!(cond)) throw std::runtime_error(fmt::format("line {}: {}", __LINE__, #cond)); \
  } while (0)

void expect_error_text(const std::function<void()>& f, const std::string& part) {
  const std::string what = error_of(f);
  if (what.find(part) == std::string::npos)
    throw std::runtime_error(fmt::format("error '{}' lacks '{}'", what, part));
}

void device_hook_checks() {
  std::vector<MemcpyCall> calls;
  g_calls = &calls;
  register_raw_source("cuda", [](int) { return std::make_unique<FakeDeviceSource>(); });
  register_device_memcpy(DeviceType::cuda,
                         [](void* dst, Device dd, const void* src, Device sd, size_t bytes) {
                           DEVICE_CHECK(dd.type == DeviceType::cuda || sd.type == DeviceType::cuda);
                           g_calls->push_back({dd, sd, bytes});
                           std::memcpy(dst, src, bytes);
                         });
  const Device dev = Device::cuda(13);
  using V = std::vector<double>;

  // cpu -> device: made contiguous on the host, then one memcpy.
  const Tensor host = Tensor::arange(6).view({2, 3});
  const Tensor d = host.transpose(0, 1).to(dev);
  DEVICE_CHECK(d.device() == dev && d.is_contiguous() && d.shape() == (Shape{3, 2}));
  DEVICE_CHECK(calls.size() == 1 && calls[0].dst == dev && calls[0].bytes == 24);
  DEVICE_CHECK(std::memcmp(d.data_ptr(), host.transpose(0, 1).contiguous().data_ptr(), 24) == 0);
  // device -> cpu.
  DEVICE_CHECK(d.to(Device::cpu()).to_vector<double>() == (V{0, 3, 1, 4, 2, 5}));
  DEVICE_CHECK(calls.size() == 2 && calls[1].src == dev && calls[1].dst == Device::cpu());

  // A strided device view copies only the storage span it covers, then gathers on the host.
  const Tensor big = Tensor::arange(12).view({3, 4}).to(dev);
  calls.clear();
  DEVICE_CHECK(big.slice(1, 1, 3).to_vector<double>() == (V{1, 2, 5, 6, 9, 10}));
  DEVICE_CHECK(calls.size() == 1 && calls[0].bytes == 10 * sizeof(float));
  DEVICE_CHECK(big.at({2, 3}) == 11);
  DEVICE_CHECK(big.slice(0, 1, 2).str().find("[[4.0000, 5.0000, 6.0000, 7.0000]], shape=(1, 4), "
                                             "dtype=f32, device=cuda:13") != std::string::npos);

  // Creation, fills, element writes and host -> device copies with casts and broadcasts.
  Tensor z = Tensor::zeros({2, 3}, DType::bf16, dev);
  DEVICE_CHECK(z.to_vector<double>() == V(6, 0.0));
  z.copy_(Tensor::from_vector<int32_t>({1, 2, 3}, {3}));
  DEVICE_CHECK(z.to_vector<double>() == (V{1, 2, 3, 1, 2, 3}));
  z.set({1, 2}, 9);
  DEVICE_CHECK(z.at({1, 2}) == 9 && z.at({0, 2}) == 3);
  z.slice(0, 1, 2).fill_(-1);
  DEVICE_CHECK(z.to_vector<double>() == (V{1, 2, 3, -1, -1, -1}));
  DEVICE_CHECK(Tensor::arange(4, DType::i64, dev).to_vector<int64_t>() ==
               (std::vector<int64_t>{0, 1, 2, 3}));
  DEVICE_CHECK(Tensor::from_vector<float>({0.5f}, {}, dev).item() == 0.5);

  // device -> device: contiguous, same dtype.
  Tensor other = Tensor::zeros({2, 3}, DType::bf16, Device::cuda(14));
  other.copy_(z);
  DEVICE_CHECK(other.to_vector<double>() == z.to_vector<double>());
  DEVICE_CHECK(z.clone().to_vector<double>() == z.to_vector<double>());
  DEVICE_CHECK(big.slice(1, 0, 2).to(Device::cuda(14)).to_vector<double>() ==
               (V{0, 1, 4, 5, 8, 9}));

  // What needs a device kernel throws, naming the op and the device.
  expect_error_text([&] { z.to(DType::f32); },
                    "[to] dtype conversion on cuda:13 is not implemented by the cuda backend");
  expect_error_text([&] { other.copy_(d); }, "[copy_] cannot copy a source of shape (3, 2)");
  expect_error_text(
      [&] {
        other.copy_(Tensor::zeros({2, 3}, DType::f32, dev));
      },
      "[copy_] dtype conversion on cuda:13 is not implemented by the cuda backend");
  expect_error_text([&] { big.transpose(0, 1).contiguous(); },
                    "[contiguous] a strided or broadcasting copy from cuda:13");
  expect_error_text(
      [&] {
        big.transpose(0, 1).copy_(Tensor::zeros({4, 3}));
      },
      "[copy_] a strided write into cuda:13");
  expect_error_text([&] { big.slice(1, 0, 2).fill_(0); }, "[fill_] a strided fill of cuda:13");
  expect_error_text([&] { Tensor::zeros({2}, DType::f32, Device::meta()).to(dev); },
                    "[to] a meta tensor");
}

TEST(TensorDeviceDeathTest, CopiesGoThroughTheRegisteredHook) {
  // "threadsafe" re-runs this one test in a fresh process instead of forking this one.
  const std::string style = GTEST_FLAG_GET(death_test_style);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        try {
          device_hook_checks();
        } catch (const std::exception& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::_Exit(1);
        }
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "");
  GTEST_FLAG_SET(death_test_style, style);
}

}  // namespace
}  // namespace fitgrad

namespace fitgrad {
namespace {

TEST(TensorStorage, WrappedMemoryIsZeroCopyAndReleasedOnce) {
  std::vector<float> bytes = {1.5f, -2.0f, 3.25f, 4.0f};
  int released = 0;
  {
    auto storage = Storage::wrap(bytes.data(), bytes.size() * sizeof(float), [&] { ++released; });
    EXPECT_FALSE(storage->from_allocator());
    Tensor t(
        std::make_shared<TensorImpl>(TensorImpl{storage, {2, 2}, {2, 1}, 0, DType::f32, nullptr}));
    EXPECT_EQ(t.at({1, 0}), 3.25);
    t.set({0, 1}, 7.0);
    EXPECT_EQ(bytes[1], 7.0f);  // the same bytes, not a copy
    Tensor view = t.transpose(0, 1);
    t = Tensor();
    EXPECT_EQ(released, 0);  // the view still holds the storage
  }
  EXPECT_EQ(released, 1);
}

}  // namespace
}  // namespace fitgrad
