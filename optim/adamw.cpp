// AdamW (see adamw.h).
#include "optim/adamw.h"

#include <cmath>

#include "tensor/backend/kernel_table.h"
#include "tensor/error.h"
#include "tensor/ops/optim_update.h"

namespace fitgrad::optim {

AdamW::AdamW(std::vector<ParamGroup> groups, const AdamWOptions& options)
    : Optimizer(std::move(groups), options.lr, "adamw"),
      options_(options),
      states_("adamw", groups_, {"exp_avg", "exp_avg_sq"}) {
  FG_CHECK(options.beta1 >= 0 && options.beta1 < 1, "[adamw] beta1 must be in [0, 1), got {}",
           options.beta1);
  FG_CHECK(options.beta2 >= 0 && options.beta2 < 1, "[adamw] beta2 must be in [0, 1), got {}",
           options.beta2);
  FG_CHECK(options.eps >= 0, "[adamw] eps must be >= 0, got {}", options.eps);
}

void AdamW::update(size_t i, const ParamGroup& group, const std::string&, const Tensor& p,
                   const Tensor& g) {
  ParamStates::State& s = states_[i];
  // Throws before any change on a backend without the kernel.
  backend::require_kernel(backend::OpId::adamw_update, p.device());
  if (s.step == 0) states_.allocate(i, /*zero=*/true);
  ++s.step;
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
  ops::adamw_update_(p, g.contiguous(), s.buffers[0], s.buffers[1], k);
}

std::map<std::string, Tensor> AdamW::state_dict() const { return states_.state_dict(steps_); }

void AdamW::load_state_dict(const std::map<std::string, Tensor>& state) {
  steps_ = states_.load_state_dict(state);
}

}  // namespace fitgrad::optim
