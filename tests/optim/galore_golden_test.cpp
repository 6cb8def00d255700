// GaLore against tests/golden/gen_galore_golden.py, an independent torch/NumPy reference
// written from the paper's pseudo-code and the reference implementation's choices: six steps
// of galore_adamw and galore_adamw_8bit on three target weights (a right projection, a left
// one whose 8-bit moments are quantized, one whose rank clamps to its size) and two other
// parameters (a 2-D embedding that is no target, a norm weight), spanning a projection
// refresh that keeps the moments. Every step's parameters must follow the reference's; the
// bases are not compared (their last bits differ: fitgrad decomposes in double), only what
// they produce. The f32 tolerance is ten times the reference's own float32-against-float64
// distance (meta "f32_vs_f64"); the 8-bit one allows a code that lands on the other side of a
// quantization boundary from a last-bit difference in the projected gradient.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/variable.h"
#include "optim/galore.h"
#include "optim/target_modules.h"
#include "tests/golden/golden_file.h"
#include "tests/optim/golden_groups.h"

namespace fitgrad::optim {
namespace {

using testing::GoldenFile;

GoldenFile& file() {
  static GoldenFile f(testing::golden_path("optim_galore.gtb"));
  return f;
}

// ||a - b|| / ||b - init||, normwise in double: the distance relative to the change.
double relative_to_change(const Tensor& a, const Tensor& b, const Tensor& init) {
  const Tensor x = a.to(DType::f32).contiguous(), y = b.contiguous(), z = init.contiguous();
  double dist = 0, change = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double d = double(x.data<float>()[i]) - double(y.data<float>()[i]);
    const double c = double(y.data<float>()[i]) - double(z.data<float>()[i]);
    dist += d * d;
    change += c * c;
  }
  return std::sqrt(dist / change);
}

// Runs one variant through the file's steps; returns the worst relative distance seen.
double worst_distance(bool eight_bit, double tolerance) {
  const auto& meta = file().meta();
  auto [params, groups] = testing::golden_params(file());
  AdamWOptions adam;
  adam.beta1 = meta.at("betas").at(0).get<double>();
  adam.beta2 = meta.at("betas").at(1).get<double>();
  adam.eps = meta.at("eps").get<double>();
  GaLoreOptions galore;
  galore.rank = meta.at("rank").get<int64_t>();
  galore.update_proj_gap = meta.at("update_proj_gap").get<int64_t>();
  galore.scale = meta.at("scale").get<double>();
  galore.target_modules = parse_target_modules(meta.at("target_modules").get<std::string>());
  GaLore opt(std::move(groups), adam, galore, eight_bit);
  size_t projected = 0;
  for (size_t i = 0; i < opt.num_params(); ++i) projected += opt.projected(i);
  EXPECT_EQ(projected, meta.at("targets").size());
  const std::string prefix = eight_bit ? "adamw8." : "adamw.";
  double worst = 0;
  for (int k = 0; k < meta.at("steps").get<int>(); ++k) {
    const std::string ks = std::to_string(k);
    for (auto& [name, p] : params)
      autograd::ensure_meta(p).grad = file().tensor("grad." + ks + "." + name);
    opt.set_lr(meta.at("lr").at(size_t(k)).get<double>());
    opt.step();
    for (const auto& [name, p] : params) {
      const double d = relative_to_change(p, file().tensor(prefix + ks + "." + name),
                                          file().tensor("init." + name));
      EXPECT_LE(d, tolerance) << name << " after step " << k;
      worst = std::max(worst, d);
    }
  }
  return worst;
}

TEST(GaLoreGolden, AdamWFollowsTheReferenceAcrossARefresh) {
  const double yardstick = file().meta().at("f32_vs_f64").get<double>();
  ASSERT_LT(yardstick, 1e-5);
  const double worst = worst_distance(false, 5e-5);
  std::printf("galore_adamw: worst distance %.2e of the change (reference f32 vs f64 %.2e)\n",
              worst, yardstick);
}

TEST(GaLoreGolden, AdamW8bitFollowsTheReferenceAcrossARefresh) {
  const double worst = worst_distance(true, 1e-3);
  std::printf("galore_adamw_8bit: worst distance %.2e of the change\n", worst);
}

}  // namespace
}  // namespace fitgrad::optim
