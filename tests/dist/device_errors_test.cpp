// Device error records over the ranks (Note [Device errors over the ranks] in
// dist/device_errors.h): two ranks of a Gloo group, one thread each, where rank 1 alone
// recorded an out-of-range id. A cpu error check stands in for a card's records
// (tensor/device_copy.h), armed per thread: every rank must raise the same error, naming rank
// 1 and its op, so that rank 0 does not go on to save a checkpoint that holds the skipped
// batch's update.
#include "dist/device_errors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "dist/gloo_group.h"
#include "tensor/device_copy.h"
#include "tensor/error.h"

namespace fitgrad::dist {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

thread_local bool t_bad_id_recorded = false;
void fake_error_check(int) {
  if (!t_bad_id_recorded) return;
  t_bad_id_recorded = false;
  throw Error("[embedding] 1 ids out of range [0, 256) on the test device since the last check");
}

// What check_device_errors_over_ranks threw on each of `world` ranks ("" when nothing), rank
// `bad` having recorded an id (none when -1).
std::vector<std::string> errors_of_ranks(int world, int bad) {
  const fs::path store =
      fs::temp_directory_path() / ("dp_device_errors_" + std::to_string(::getpid()));
  fs::remove_all(store);
  fs::create_directories(store);
  std::vector<std::string> errors(size_t(world), "");
  register_device_error_check(DeviceType::cpu, fake_error_check);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        auto group = make_gloo_group(
            {r, world, "file:" + store.string(), "127.0.0.1", std::chrono::seconds(30), ""});
        t_bad_id_recorded = r == bad;
        check_device_errors_over_ranks(group.get(), Device::cpu());
      } catch (const Error& e) {
        errors[size_t(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  register_device_error_check(DeviceType::cpu, nullptr);
  fs::remove_all(store);
  return errors;
}

TEST(DeviceErrorsOverRanks, EveryRankRaisesTheErrorThatOneRankRecorded) {
  const std::vector<std::string> errors = errors_of_ranks(2, 1);
  for (const std::string& e : errors) {
    EXPECT_THAT(e, HasSubstr("[dist] rank(s) 1 of 2 recorded indices out of range")) << e;
    EXPECT_THAT(e, HasSubstr("rank 1: [embedding] 1 ids out of range [0, 256)")) << e;
  }
  EXPECT_EQ(errors[0], errors[1]);  // the same words on every rank
}

TEST(DeviceErrorsOverRanks, CleanRecordsRaiseNothing) {
  for (const std::string& e : errors_of_ranks(2, -1)) EXPECT_EQ(e, "");
}

TEST(DeviceErrorsOverRanks, OneProcessRaisesItsOwnError) {
  register_device_error_check(DeviceType::cpu, fake_error_check);
  t_bad_id_recorded = true;
  std::string error;
  try {
    check_device_errors_over_ranks(nullptr, Device::cpu());
  } catch (const Error& e) {
    error = e.what();
  }
  register_device_error_check(DeviceType::cpu, nullptr);
  EXPECT_EQ(error.rfind("[embedding] 1 ids out of range", 0), 0u) << error;
}

}  // namespace
}  // namespace fitgrad::dist
