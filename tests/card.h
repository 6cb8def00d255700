// Whether a test that needs a CUDA card runs, skips or fails (issue 57).
//
// Note [Card tests cannot pass by skipping]
// Every CUDA test skips where usable_device_count(cuda) is 0, so that the suite passes on a
// machine without a GPU. On the lent GPU machine that skip would hide a CUDA that cannot
// start (no driver, a driver older than the runtime, no device node): the device count is then
// 0 too, every card test skips, and a step of the device check reported "ok". Under
// FITGRAD_REQUIRE_CUDA=1, which tools/device-check.sh sets outside --rehearse, such a test
// fails instead, with the reason the count gave (device_count_problem: cudaGetDeviceCount's
// error). FG_SKIP_WITHOUT_CARD() is the first statement of every card test.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "tensor/device_registry.h"

namespace fitgrad::testing {

constexpr const char* kRequireCudaVariable = "FITGRAD_REQUIRE_CUDA";

// What a card test does: run (nullopt), or skip or fail with the returned message, from the
// usable device count, the count's problem, and whether a card is required.
struct CardVerdict {
  bool fail = false;
  std::string message;
};
inline std::optional<CardVerdict> card_verdict(int count, const std::string& problem,
                                               bool required) {
  if (count > 0) return std::nullopt;
  const std::string why =
      "no usable CUDA device (" + (problem.empty() ? std::string("none visible") : problem) + ")";
  if (required)
    return CardVerdict{true, why + ", and " + kRequireCudaVariable +
                                 " is set: a card test must run here, not skip"};
  return CardVerdict{false, why};
}

// Whether FITGRAD_REQUIRE_CUDA asks card tests to fail rather than skip ("1").
inline bool card_required() {
  const char* v = std::getenv(kRequireCudaVariable);
  return v != nullptr && std::string(v) == "1";
}

inline std::optional<CardVerdict> this_machines_card_verdict() {
  return card_verdict(usable_device_count(DeviceType::cuda), device_count_problem(DeviceType::cuda),
                      card_required());
}

}  // namespace fitgrad::testing

// Skips the test without a usable card, or fails it under FITGRAD_REQUIRE_CUDA=1.
#define FG_SKIP_WITHOUT_CARD()                                                       \
  if (const auto fg_card_verdict = ::fitgrad::testing::this_machines_card_verdict(); \
      !fg_card_verdict) {                                                            \
  } else if (fg_card_verdict->fail)                                                  \
    FAIL() << fg_card_verdict->message;                                              \
  else                                                                               \
    GTEST_SKIP() << fg_card_verdict->message
