// Card tests cannot pass by skipping (Note [Card tests cannot pass by skipping] in
// tests/card.h): the verdict from the device count, its reason and FITGRAD_REQUIRE_CUDA; a
// card test of this binary run again without a card, skipping and then failing under the
// variable; and CudaCard.TheRuntimeCountsADevice, the device check's first test, which
// prints cudaGetDeviceCount's error where CUDA cannot start.
#include "tests/card.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <utility>

#include "tests/run_self.h"

namespace fitgrad::testing {
namespace {

using ::testing::HasSubstr;

TEST(CardVerdict, RunsWithACardSkipsWithoutOneAndFailsWhenOneIsRequired) {
  EXPECT_FALSE(card_verdict(1, "", false));
  EXPECT_FALSE(card_verdict(2, "", true));
  const std::string problem =
      "[cuda] cudaGetDeviceCount failed: no CUDA-capable device is "
      "detected (cudaErrorNoDevice)";
  const auto skip = card_verdict(0, problem, false);
  ASSERT_TRUE(skip);
  EXPECT_FALSE(skip->fail);
  EXPECT_THAT(skip->message, HasSubstr(problem));
  const auto fail = card_verdict(0, problem, true);
  ASSERT_TRUE(fail);
  EXPECT_TRUE(fail->fail);
  EXPECT_THAT(fail->message, HasSubstr(problem));
  EXPECT_THAT(fail->message, HasSubstr("FITGRAD_REQUIRE_CUDA is set"));
}

// `test` of this binary in a fresh process, with FITGRAD_REQUIRE_CUDA set to `require` (unset
// when empty): its exit code and output.
std::pair<int, std::string> run_alone(const std::string& test, const std::string& require) {
  return run_self(require.empty() ? std::string("-u ") + kRequireCudaVariable
                                  : std::string(kRequireCudaVariable) + "=" + require,
                  test);
}

TEST(CardVerdict, WithoutACardARequiredCardTestFailsInsteadOfSkipping) {
  if (usable_device_count(DeviceType::cuda) > 0)
    GTEST_SKIP() << "shows what happens without a usable card, and this machine has one";
  const std::string test = "CudaCard.TheRuntimeCountsADevice";
  const auto [skipped_rc, skipped] = run_alone(test, "");
  EXPECT_EQ(skipped_rc, 0) << skipped;
  EXPECT_THAT(skipped, HasSubstr("[  SKIPPED ] 1 test")) << skipped;
  const auto [failed_rc, failed] = run_alone(test, "1");
  EXPECT_NE(failed_rc, 0) << failed;
  EXPECT_THAT(failed, HasSubstr("[  FAILED  ] 1 test")) << failed;
  EXPECT_THAT(failed, HasSubstr("FITGRAD_REQUIRE_CUDA is set")) << failed;
  EXPECT_THAT(failed, HasSubstr(device_count_problem(DeviceType::cuda))) << failed;
}

// The device check's binaries step runs this under FITGRAD_REQUIRE_CUDA=1: where CUDA cannot
// start, its failure carries cudaGetDeviceCount's error (or that the build has no CUDA).
TEST(CudaCard, TheRuntimeCountsADevice) {
  FG_SKIP_WITHOUT_CARD();
  std::cout << "CUDA devices: " << usable_device_count(DeviceType::cuda) << "\n";
  EXPECT_EQ(device_count_problem(DeviceType::cuda), "");
}

}  // namespace
}  // namespace fitgrad::testing
