// AdamW (with and without clip_grad_norm) and SGD (momentum, dampening, Nesterov) against
// torch.optim on the same parameters and gradients: the parameters after each of five
// steps with a changing learning rate, the final states, the per-parameter step counts
// (one parameter has no gradient at one step) and the clipping norms. The data comes from
// tests/golden/gen_optim_golden.py.
//
// Note [Optimizer golden tolerance]
// torch's float32 run is off its float64 run by about 2e-7 normwise (meta torch_f32_err);
// fitgrad does the same f32 arithmetic in the same order, so it differs from torch only by
// rounding (a fused multiply-add in torch's vector kernels, a reciprocal for a division) and
// must agree to 1e-6 relative; elements that cancel to near zero get an absolute 1e-7 of the
// tensor's largest element.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>

#include "autograd/variable.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/sgd.h"
#include "tests/golden/golden_file.h"
#include "tests/optim/golden_groups.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::optim {
namespace {

using testing::GoldenFile;

void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const auto w = testing::to_f64(want);
  double scale = 0;
  for (double x : w) scale = std::max(scale, std::fabs(x));
  EXPECT_TRUE(testing::all_close(testing::to_f64(got), w, 1e-6, 1e-7 * scale)) << what;
}

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(std::vector<ParamGroup>)>;

// Replays the file's steps and compares every parameter after every step, the norms when
// the case clips, then the final states named `buffers`.
void replay(const std::string& file_name, const MakeOptimizer& make,
            const std::vector<std::string>& buffers) {
  const GoldenFile file(testing::golden_path(file_name));
  const auto& meta = file.meta();
  auto [params, groups] = testing::golden_params(file);
  auto opt = make(std::move(groups));
  const bool clip = !meta.at("clip_max_norm").is_null();
  const auto lrs = meta.at("lr").get<std::vector<double>>();
  const int steps = meta.at("steps").get<int>();
  for (int k = 0; k < steps; ++k) {
    std::vector<Tensor> with_grad;
    for (auto& [name, p] : params) {
      const std::string key = "grad." + std::to_string(k) + "." + name;
      if (file.has(key)) {
        autograd::ensure_meta(p).grad = file.tensor(key);
        with_grad.push_back(p);
      } else {
        autograd::clear_grad(p);
      }
    }
    if (clip) {
      const double norm = clip_grad_norm(with_grad, meta.at("clip_max_norm").get<double>());
      const double want = meta.at("norm").at(size_t(k)).get<double>();
      EXPECT_NEAR(norm, want, 1e-6 * want) << file_name << " step " << k;
    }
    opt->set_lr(lrs[size_t(k)]);
    opt->step();
    for (const auto& [name, p] : params) {
      const std::string key = "param." + std::to_string(k) + "." + name;
      expect_close(p, file.tensor(key), file_name + " " + key);
    }
  }
  EXPECT_EQ(opt->steps(), steps);
  const auto state = opt->state_dict();
  const std::string skipped = meta.at("skip").at("param").get<std::string>();
  for (const auto& [name, p] : params) {
    for (const std::string& b : buffers)
      expect_close(state.at(name + "." + b), file.tensor(name + "." + b), file_name + " " + b);
    EXPECT_EQ(state.at(name + ".step").item(), name == skipped ? steps - 1 : steps) << name;
  }
  EXPECT_EQ(state.at("step").item(), steps);
}

MakeOptimizer adamw(double eps) {
  return [eps](std::vector<ParamGroup> groups) {
    AdamWOptions o;
    o.beta1 = 0.9;
    o.beta2 = 0.95;
    o.eps = eps;
    return std::make_unique<AdamW>(std::move(groups), o);
  };
}

TEST(OptimGolden, AdamWMatchesTorch) {
  replay("optim_adamw.gtb", adamw(1e-3), {"exp_avg", "exp_avg_sq"});
}

TEST(OptimGolden, AdamWWithClipGradNormMatchesTorch) {
  replay("optim_adamw_clip.gtb", adamw(1e-8), {"exp_avg", "exp_avg_sq"});
}

TEST(OptimGolden, SgdMomentumDampeningMatchesTorch) {
  replay("optim_sgd.gtb",
         [](std::vector<ParamGroup> groups) {
           return std::make_unique<SGD>(std::move(groups), SgdOptions{1e-2, 0.9, 0.1, false});
         },
         {"momentum_buffer"});
}

TEST(OptimGolden, SgdNesterovMatchesTorch) {
  replay("optim_sgd_nesterov.gtb",
         [](std::vector<ParamGroup> groups) {
           return std::make_unique<SGD>(std::move(groups), SgdOptions{1e-2, 0.9, 0.0, true});
         },
         {"momentum_buffer"});
}

}  // namespace
}  // namespace fitgrad::optim
