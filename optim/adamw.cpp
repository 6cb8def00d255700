// AdamW (see adamw.h).
#include "optim/adamw.h"

#include <cmath>

#include "tensor/backend/kernel_table.h"
#include "tensor/error.h"
#include "tensor/ops/optim_update.h"

namespace fitgrad::optim {
namespace {

// Both moments: f32, the parameter's shape, zero at the first step.
std::vector<StateSpec> adamw_specs(const std::string&, const Tensor& p) {
  return {{.name = "exp_avg", .shape = p.shape()}, {.name = "exp_avg_sq", .shape = p.shape()}};
}

}  // namespace

AdamW::AdamW(std::vector<ParamGroup> groups, const AdamWOptions& options)
    : Optimizer(std::move(groups), options.lr, "adamw", adamw_specs), options_(options) {
  FG_CHECK(options.beta1 >= 0 && options.beta1 < 1, "[adamw] beta1 must be in [0, 1), got {}",
           options.beta1);
  FG_CHECK(options.beta2 >= 0 && options.beta2 < 1, "[adamw] beta2 must be in [0, 1), got {}",
           options.beta2);
  FG_CHECK(options.eps >= 0, "[adamw] eps must be >= 0, got {}", options.eps);
}

void AdamW::update(size_t i, const ParamGroup& group, const std::string&, const Tensor& p,
                   const Tensor& g) {
  // Throws before any change on a backend without the kernel.
  backend::require_kernel(backend::OpId::adamw_update, p.device());
  ParamStates::State& s = states_.begin_update(i);
  // The scalars as torch computes them in Python (double), then rounds them to f32.
  const double t = double(s.step);
  const double bias_correction1 = 1 - std::pow(options_.beta1, t);
  const double bias_correction2 = 1 - std::pow(options_.beta2, t);
  const backend::AdamWScalars k{float(1 - lr_ * group.weight_decay),
                                float(options_.beta1),
                                float(1 - options_.beta1),
                                float(options_.beta2),
                                float(1 - options_.beta2),
                                float(std::sqrt(bias_correction2)),
                                float(options_.eps),
                                float(-(lr_ / bias_correction1))};
  ops::adamw_update_(p, g.contiguous(), s.buffers[0], s.buffers[1], k, rounding(p));
}

}  // namespace fitgrad::optim
