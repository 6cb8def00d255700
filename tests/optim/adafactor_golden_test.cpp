// Both Adafactors against tests/golden/gen_adafactor_golden.py's NumPy references (float64,
// stored as f32): 20 steps on two parameter groups (a matrix, a 3-D tensor factored over
// its last two dims, two vectors), one parameter without a gradient at one step, zero rows
// and columns of a gradient (the eps floors). Every parameter after every step, the final
// state tensors and step counts.
//
// Note [Adafactor golden tolerance]
// The reference's own float32 run lands within meta f32_err (2e-7 .. 5e-7, normwise) of its
// float64 one; fitgrad computes in f32 with double sums, in a different order, so it must
// land within 10 x f32_err normwise of float64 (at least 2e-6), parameter by parameter.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>

#include "autograd/variable.h"
#include "optim/adafactor.h"
#include "tests/golden/golden_file.h"
#include "tests/optim/golden_groups.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::optim {
namespace {

using testing::GoldenFile;
using testing::normwise_err;
using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(std::vector<ParamGroup>)>;

void replay(const std::string& file_name, const MakeOptimizer& make) {
  const GoldenFile file(testing::golden_path(file_name));
  const auto& meta = file.meta();
  const double tol = std::max(2e-6, 10 * meta.at("f32_err").get<double>());
  auto [params, groups] = testing::golden_params(file);
  auto opt = make(std::move(groups));
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
    if (!meta.at("lr").is_null()) opt->set_lr(meta.at("lr").at(size_t(k)).get<double>());
    opt->step();
    for (const auto& [name, p] : params) {
      const std::string key = "param." + std::to_string(k) + "." + name;
      const double err = normwise_err(p, file.tensor(key));
      worst = std::max(worst, err);
      EXPECT_LE(err, tol) << file_name << " " << key;
    }
  }
  testing::expect_golden_state(opt->state_dict(), file, tol, file_name, steps);
  if (std::getenv("GOLDEN_VERBOSE"))
    std::printf("%s: worst parameter error %.2e (tolerance %.1e)\n", file_name.c_str(), worst, tol);
}

TEST(AdafactorGolden, TorchVariantMatchesTheReference) {
  replay("optim_adafactor_torch.gtb", [](std::vector<ParamGroup> groups) {
    return std::make_unique<Adafactor>(std::move(groups), AdafactorOptions{});
  });
}

TEST(AdafactorGolden, HfDefaultsWithTheRelativeStepMatchTheReference) {
  replay("optim_adafactor_hf.gtb", [](std::vector<ParamGroup> groups) {
    return std::make_unique<AdafactorHF>(std::move(groups), AdafactorHFOptions{});
  });
}

TEST(AdafactorGolden, HfWithALearningRateAndBeta1MatchesTheReference) {
  replay("optim_adafactor_hf_manual.gtb", [](std::vector<ParamGroup> groups) {
    AdafactorHFOptions o;
    o.lr = 0.05;
    o.relative_step = false;
    o.scale_parameter = false;
    o.beta1 = 0.9;
    return std::make_unique<AdafactorHF>(std::move(groups), o);
  });
}

TEST(Adafactor, HfRefusesTheCombinationsTransformersRefuses) {
  AdafactorHFOptions o;
  o.lr = 1e-3;
  testing::expect_error([&] { AdafactorHF({}, o); }, "[adafactor_hf]",
                        "cannot be combined with relative_step");
  AdafactorHFOptions w;
  w.relative_step = false;
  w.lr = 1e-3;
  w.warmup_init = true;
  testing::expect_error([&] { AdafactorHF({}, w); }, "[adafactor_hf]",
                        "warmup_init needs relative_step");
}

TEST(Adafactor, AMatrixKeepsARowAndAColumnVector) {
  const std::vector<ParamGroup> groups{ParamGroup{
      {{"w", testing::random_tensor({768, 3072}, 1)}, {"b", testing::random_tensor({3072}, 2)}},
      0.0}};
  const Adafactor torch_opt(groups, {});
  EXPECT_EQ(torch_opt.state_specs(0)[0].shape, (Shape{768, 1}));
  EXPECT_EQ(torch_opt.state_specs(0)[1].shape, (Shape{1, 3072}));
  EXPECT_EQ(state_bytes(torch_opt.state_specs(0)), 4 * (768 + 3072));
  EXPECT_EQ(state_bytes(torch_opt.state_specs(1)), 4 * 3072);
  const AdafactorHF hf_opt(groups, {});
  EXPECT_EQ(hf_opt.state_specs(0)[0].shape, (Shape{768}));
  EXPECT_EQ(hf_opt.state_specs(0)[1].shape, (Shape{3072}));
}

}  // namespace
}  // namespace fitgrad::optim
