// The dynamic loss scaler (Note [Dynamic loss scaling] in optim/loss_scaler.h) against
// torch.amp.GradScaler's documented rules: init 2^16, x2 after 2000 clean steps in a row,
// x0.5 and a restart on inf/NaN, no growth into inf; unscaling multiplies by
// float(1 / double(scale)) and finds any inf or NaN; the state round-trips.
#include "optim/loss_scaler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "autograd/variable.h"
#include "tensor/error.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::optim {
namespace {

using ::testing::HasSubstr;
using testing::random_tensor;

TEST(LossScaler, FollowsGradScalersTrajectory) {
  LossScaler s;
  EXPECT_EQ(s.scale(), 65536.0f);
  for (int i = 0; i < 1999; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_EQ(s.growth_tracker(), 1999);
  s.update(false);  // the 2000th clean step in a row
  EXPECT_EQ(s.scale(), 131072.0f);
  EXPECT_EQ(s.growth_tracker(), 0);
  for (int i = 0; i < 1500; ++i) s.update(false);
  s.update(true);  // an inf: back off, and the run of clean steps starts over
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_EQ(s.growth_tracker(), 0);
  for (int i = 0; i < 1999; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 65536.0f);

  LossScaler top({.init_scale = std::ldexp(1.0, 127), .growth_interval = 1});
  top.update(false);  // 2^128 is not a finite f32: the scale stays
  EXPECT_EQ(top.scale(), std::ldexp(1.0f, 127));
  EXPECT_EQ(top.growth_tracker(), 0);
}

TEST(LossScaler, UnscalesByTheF32ReciprocalAndFindsInfAndNan) {
  LossScaler s({.init_scale = 3.0});  // 1/3 is inexact: the f32 reciprocal matters
  Tensor a = random_tensor({5, 7}, 1), b = random_tensor({11}, 2);
  for (const Tensor& p : {a, b}) autograd::set_requires_grad(p);
  const Tensor ga = random_tensor({5, 7}, 3), gb = random_tensor({11}, 4);
  autograd::ensure_meta(a).grad = ga.clone();
  autograd::ensure_meta(b).grad = gb.clone();
  EXPECT_FALSE(s.unscale_and_check({a, b}));
  const float inv = float(1.0 / 3.0);
  const std::vector<float> want = ga.to_vector<float>(), got = autograd::grad(a).to_vector<float>();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i] * inv) << i;

  for (const float bad : {std::numeric_limits<float>::infinity(), NAN}) {
    std::vector<float> v = gb.to_vector<float>();
    v[7] = bad;
    autograd::ensure_meta(b).grad = Tensor::from_vector(v, {11});
    EXPECT_TRUE(s.unscale_and_check({a, b})) << bad;
  }
  // On meta there are no values: nothing is found.
  Tensor m = Tensor::empty({4}, DType::f32, Device::meta());
  autograd::set_requires_grad(m);
  autograd::ensure_meta(m).grad = Tensor::empty({4}, DType::f32, Device::meta());
  EXPECT_FALSE(s.unscale_and_check({m}));
}

TEST(LossScaler, StateRoundTripsAndABadOneIsNamed) {
  LossScaler s;
  for (int i = 0; i < 17; ++i) s.update(false);
  s.update(true);
  for (int i = 0; i < 5; ++i) s.update(false);
  LossScaler t;
  t.load_state_dict(s.state_dict());
  EXPECT_EQ(t.scale(), s.scale());
  EXPECT_EQ(t.growth_tracker(), 5);
  auto bad = s.state_dict();
  bad["growth_tracker"] = Tensor::full({}, 2000.0, DType::i64);
  try {
    t.load_state_dict(bad);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'growth_tracker' must be in [0, 2000)"));
  }
  EXPECT_THROW(t.load_state_dict({{"scale", Tensor::full({}, 1.0, DType::f32)}}), Error);
  EXPECT_THROW(LossScaler({.backoff_factor = 1.0}), Error);
}

}  // namespace
}  // namespace fitgrad::optim
