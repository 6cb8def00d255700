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
  ops::adamw_update_(p, g.contiguous(), s.buffers[0], s.buffers[1],
                     adamw_scalars(options_, lr_, group.weight_decay, s.step), rounding(p));
}

backend::AdamWScalars adamw_scalars(const AdamWOptions& o, double lr, double weight_decay,
                                    int64_t step) {
  // The scalars as torch computes them in Python (double), then rounds them to f32.
  const double t = double(step);
  const double bias_correction1 = 1 - std::pow(o.beta1, t);
  const double bias_correction2 = 1 - std::pow(o.beta2, t);
  return {float(1 - lr * weight_decay),
          float(o.beta1),
          float(1 - o.beta1),
          float(o.beta2),
          float(1 - o.beta2),
          float(std::sqrt(bias_correction2)),
          float(o.eps),
          float(-(lr / bias_correction1))};
}

}  // namespace fitgrad::optim
