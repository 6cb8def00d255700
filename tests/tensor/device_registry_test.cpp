// The device-count registry: cpu and meta always have one device, cuda has none unless a
// backend registered a count that finds one, and a failing count means none. Registering
// a fake count runs in a child process (a death test), so it never leaks into the rest of
// the suite.
#include "tensor/device_registry.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace fitgrad {
namespace {

TEST(DeviceRegistry, CpuAndMetaAlwaysHaveOneDevice) {
  EXPECT_EQ(usable_device_count(DeviceType::cpu), 1);
  EXPECT_EQ(usable_device_count(DeviceType::meta), 1);
}

TEST(DeviceRegistry, CudaCountsOnlyUsableDevices) {
#ifdef FITGRAD_HAVE_CUDA
  // The driver's count: 0 with no GPU or no usable driver, and never an exception.
  EXPECT_GE(usable_device_count(DeviceType::cuda), 0);
#else
  EXPECT_EQ(usable_device_count(DeviceType::cuda), 0);  // no backend registered a count
#endif
}

TEST(DeviceRegistryDeathTest, ARegisteredCountIsUsedAndAFailingOneIsZero) {
  // "threadsafe" re-runs this one test in a fresh process instead of forking this one.
  const std::string style = GTEST_FLAG_GET(death_test_style);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        register_device_count(DeviceType::cuda, [] { return 3; });
        const bool counted = usable_device_count(DeviceType::cuda) == 3;
        register_device_count(DeviceType::cuda, [] { return -1; });
        const bool negative_is_zero = usable_device_count(DeviceType::cuda) == 0;
        register_device_count(DeviceType::cuda, []() -> int {
          throw std::runtime_error("cudaErrorInsufficientDriver");
        });
        const bool throwing_is_zero = usable_device_count(DeviceType::cuda) == 0;
        std::_Exit(counted && negative_is_zero && throwing_is_zero ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  GTEST_FLAG_SET(death_test_style, style);
}

}  // namespace
}  // namespace fitgrad
