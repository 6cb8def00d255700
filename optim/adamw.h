// AdamW with torch.optim.AdamW's semantics (Loshchilov & Hutter, decoupled weight decay):
// per step t of a parameter,
//   p <- p * (1 - lr * weight_decay)
//   m <- beta1 m + (1 - beta1) g,  v <- beta2 v + (1 - beta2) g^2
//   p <- p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// States exp_avg (m) and exp_avg_sq (v) are f32 for every parameter dtype and created at
// the first step (Note [Optimizer state is lazy] in param_state.h); the update is one fused
// pass per parameter (Note [Optimizer kernels] in tensor/cpu/optim_update.cpp).
#pragma once

#include "optim/optimizer.h"

namespace fitgrad::optim {

struct AdamWOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  // The default for groups built from options alone; the optimizer uses each
  // ParamGroup's own weight_decay.
  double weight_decay = 0.0;
};

// The kernel's scalars of one AdamW step: learning rate lr, the group's weight decay, and
// the parameter's step count t (1 at its first step).
backend::AdamWScalars adamw_scalars(const AdamWOptions& o, double lr, double weight_decay,
                                    int64_t t);

class AdamW : public Optimizer {
 public:
  AdamW(std::vector<ParamGroup> groups, const AdamWOptions& options);

  std::string name() const override { return "adamw"; }

  const AdamWOptions& options() const { return options_; }

 protected:
  void update(size_t index, const ParamGroup& group, const std::string& name, const Tensor& param,
              const Tensor& grad) override;

 private:
  AdamWOptions options_;
};

}  // namespace fitgrad::optim
