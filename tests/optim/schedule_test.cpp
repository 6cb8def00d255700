// Learning-rate schedules against Hugging Face transformers' formulas, evaluated by
// tests/golden/gen_optim_golden.py (optim_schedules.gtb) at warmup boundaries, the middle,
// the end and past it, for three (base lr, warmup, total) settings; plus values that follow
// from the published definitions by hand, and the errors for unknown names.
#include "optim/schedule.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/golden/golden_file.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::optim {
namespace {

TEST(LrSchedule, MatchesTransformersFormulas) {
  const testing::GoldenFile file(testing::golden_path("optim_schedules.gtb"));
  const auto& cases = file.meta().at("cases");
  ASSERT_EQ(cases.size(), 21u);
  for (const auto& c : cases) {
    const std::string type = c.at("type").get<std::string>();
    const LrSchedule s =
        make_lr_schedule(type, c.at("base_lr").get<double>(), c.at("warmup").get<int64_t>(),
                         c.at("total").get<int64_t>());
    EXPECT_EQ(s.type(), type);
    const auto steps = c.at("steps").get<std::vector<int64_t>>();
    const auto lrs = c.at("lr").get<std::vector<double>>();
    for (size_t i = 0; i < steps.size(); ++i)
      EXPECT_NEAR(s.lr_at(steps[i]), lrs[i], 1e-12 * std::fabs(lrs[i]) + 1e-20)
          << type << " warmup " << c.at("warmup") << " total " << c.at("total") << " step "
          << steps[i];
  }
}

TEST(LrSchedule, HandComputedValues) {
  // Warmup 10, total 110: step 10 ends the warmup at the full lr, step 60 is halfway.
  const double lr = 1e-3;
  const auto at = [&](const char* type, int64_t step) {
    return make_lr_schedule(type, lr, 10, 110).lr_at(step);
  };
  EXPECT_EQ(at("linear", 0), 0.0);
  EXPECT_DOUBLE_EQ(at("linear", 5), 0.5 * lr);
  EXPECT_DOUBLE_EQ(at("linear", 10), lr);
  EXPECT_DOUBLE_EQ(at("linear", 60), 0.5 * lr);
  EXPECT_EQ(at("linear", 110), 0.0);
  EXPECT_EQ(at("linear", 500), 0.0);
  EXPECT_DOUBLE_EQ(at("cosine", 60), 0.5 * lr);
  EXPECT_DOUBLE_EQ(at("cosine", 35), lr * (0.5 + 0.5 * std::sqrt(0.5)));  // cos(pi/4)
  EXPECT_DOUBLE_EQ(at("cosine_with_restarts", 60), 0.5 * lr);
  EXPECT_EQ(at("cosine_with_restarts", 110), 0.0);
  EXPECT_DOUBLE_EQ(at("polynomial", 60), 0.5 * (lr - 1e-7) + 1e-7);
  EXPECT_DOUBLE_EQ(at("polynomial", 200), 1e-7);
  EXPECT_EQ(at("constant", 0), lr);
  EXPECT_EQ(at("constant_with_warmup", 0), 0.0);
  EXPECT_EQ(at("constant_with_warmup", 1000), lr);
  EXPECT_DOUBLE_EQ(at("inverse_sqrt", 40), lr / 2);  // 1 / sqrt(40 / 10)
  EXPECT_DOUBLE_EQ(make_lr_schedule("inverse_sqrt", lr, 0, 0).lr_at(30000), lr / 2);
}

TEST(LrSchedule, NamesAndErrors) {
  EXPECT_EQ(lr_schedule_names(),
            (std::vector<std::string>{"linear", "cosine", "cosine_with_restarts", "polynomial",
                                      "constant", "constant_with_warmup", "inverse_sqrt"}));
  testing::expect_error([] { make_lr_schedule("cosin", 1e-3, 0, 10); }, "[lr_scheduler_type]",
                        "unknown 'cosin' (known: linear, cosine, cosine_with_restarts");
  testing::expect_error([] { make_lr_schedule("warmup_stable_decay", 1e-3, 0, 10); },
                        "[lr_scheduler_type]", "'warmup_stable_decay' is not implemented yet");
  testing::expect_error([] { make_lr_schedule("polynomial", 1e-8, 0, 10); }, "[lr_scheduler_type]",
                        "must be larger");
  testing::expect_error([] { make_lr_schedule("linear", 1e-3, -1, 10); }, "[lr_scheduler_type]",
                        "must be >= 0");
}

}  // namespace
}  // namespace fitgrad::optim
