// APOLLO and APOLLO-Mini against tests/golden/gen_apollo_golden.py's NumPy reference (float64,
// stored as f32; itself checked against the authors' apollo_torch to 2e-16): 12 steps on two
// parameter groups, a weight projected on the right (channels its rows) and one on the left
// (channels its columns), a 2-D non-target and a 1-D target's parameter (plain Adam), one
// parameter without a gradient at one step, projections redrawn every 4 of its own steps, and
// the norm-growth limiter acting at some steps. Every parameter after every step, the final
// state and step counts, and the projections themselves: the Philox keys exactly, the
// matrices to an ulp (both sides compute Box-Muller in double with the C library).
//
// Note [APOLLO golden tolerance]
// The reference's own float32 run lands within meta f32_err (3e-7, normwise) of its float64
// one; fitgrad computes in f32 with double norms, in another order, so it must land within 10
// x f32_err normwise of float64 (at least 2e-6), tensor by tensor, as Adafactor's test asks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "autograd/variable.h"
#include "optim/apollo.h"
#include "tests/golden/golden_file.h"
#include "tests/optim/golden_groups.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::optim {
namespace {

using testing::GoldenFile;
using testing::normwise_err;

ApolloOptions options_of(const nlohmann::json& meta) {
  ApolloOptions o;
  o.beta1 = meta.at("betas").at(0).get<double>();
  o.beta2 = meta.at("betas").at(1).get<double>();
  o.eps = meta.at("eps").get<double>();
  o.rank = meta.at("rank").get<int64_t>();
  o.scale = meta.at("scale").get<double>();
  o.scaling = meta.at("scale_type") == "tensor" ? ApolloScaling::tensor : ApolloScaling::channel;
  o.update_proj_gap = meta.at("update_proj_gap").get<int64_t>();
  o.norm_growth_limit = meta.at("norm_growth_limit").get<double>();
  o.target_modules = meta.at("target_modules").get<std::vector<std::string>>();
  o.seed = meta.at("seed").get<uint64_t>();
  return o;
}

void replay(const std::string& file_name) {
  const GoldenFile file(testing::golden_path(file_name));
  const auto& meta = file.meta();
  const double tol = std::max(2e-6, 10 * meta.at("f32_err").get<double>());
  auto [params, groups] = testing::golden_params(file);
  Apollo opt(std::move(groups), options_of(meta));
  const int steps = meta.at("steps").get<int>();
  double worst = 0;
  for (int k = 0; k < steps; ++k) {
    for (auto& [name, p] : params) {
      const std::string key = "grad." + std::to_string(k) + "." + name;
      if (file.has(key))
        autograd::ensure_meta(p).grad = file.tensor(key);
      else
        autograd::clear_grad(p);
    }
    opt.set_lr(meta.at("lr").at(size_t(k)).get<double>());
    opt.step();
    for (const auto& [name, p] : params) {
      const std::string key = "param." + std::to_string(k) + "." + name;
      const double err = normwise_err(p, file.tensor(key));
      worst = std::max(worst, err);
      EXPECT_LE(err, tol) << file_name << " " << key;
    }
  }
  const auto state = opt.state_dict();
  EXPECT_EQ(state.at("projection_seed").item(), meta.at("seed").get<double>());
  testing::expect_golden_state(state, file, tol, file_name, steps, {"projection_seed"});
  if (std::getenv("GOLDEN_VERBOSE"))
    std::printf("%s: worst parameter error %.2e (tolerance %.1e)\n", file_name.c_str(), worst, tol);
}

TEST(ApolloGolden, ChannelWiseScalingMatchesTheReference) { replay("optim_apollo.gtb"); }

TEST(ApolloGolden, MiniTensorWiseScalingMatchesTheReference) { replay("optim_apollo_mini.gtb"); }

TEST(ApolloGolden, ProjectionsAreTheDocumentedGeneratorsDraws) {
  for (const char* file_name : {"optim_apollo.gtb", "optim_apollo_mini.gtb"}) {
    SCOPED_TRACE(file_name);
    const GoldenFile file(testing::golden_path(file_name));
    const auto& meta = file.meta();
    auto [params, groups] = testing::golden_params(file);
    const Apollo opt(std::move(groups), options_of(meta));
    const uint64_t seed = meta.at("seed").get<uint64_t>();
    std::vector<std::string> names;  // by index
    for (const ParamGroup& g : opt.groups())
      for (const auto& [name, p] : g.params) names.push_back(name);
    for (size_t i = 0; i < opt.num_params(); ++i) {
      const std::string& name = names[i];
      ASSERT_EQ(opt.projected(i), meta.at("projected").contains(name)) << name;
      if (!opt.projected(i)) continue;
      // Right: (m, r) moments, channels the rows; left: (r, n).
      const Shape& w = params.at(name).shape();
      const bool right = meta.at("projected").at(name) == "right";
      const Shape low = right ? Shape{w[0], opt.options().rank} : Shape{opt.options().rank, w[1]};
      EXPECT_EQ(opt.state_specs(i)[0].shape, low) << name;
      const auto& keys = meta.at("keys").at(name);
      for (size_t j = 0; j < keys.size(); ++j) {
        EXPECT_EQ(apollo_projection_key(seed, i, j), std::stoull(keys.at(j).get<std::string>()))
            << name << " refresh " << j;
        const Tensor want = file.tensor("proj." + name + "." + std::to_string(j));
        const Tensor got = opt.projection(i, int64_t(j), DType::f32);
        ASSERT_EQ(got.shape(), want.shape());
        EXPECT_LE(normwise_err(got, want), 1e-7) << name << " refresh " << j;
      }
    }
  }
}

}  // namespace
}  // namespace fitgrad::optim
