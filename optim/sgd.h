// SGD with torch.optim.SGD's semantics: d = g + weight_decay p; with momentum a buffer
// b = d at a parameter's first step and b <- momentum b + (1 - dampening) d after, and
// d = b (or d + momentum b with Nesterov); then p <- p - lr d. The momentum buffer is f32
// and created at the first step (Note [Optimizer state is lazy] in param_state.h); with
// momentum 0 there is no buffer.
#pragma once

#include "optim/optimizer.h"

namespace fitgrad::optim {

struct SgdOptions {
  double lr = 1e-3, momentum = 0.0, dampening = 0.0;
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  // Each ParamGroup's weight_decay is used.
  SGD(std::vector<ParamGroup> groups, const SgdOptions& options);

  std::string name() const override { return "sgd"; }

 protected:
  void update(size_t index, const ParamGroup& group, const std::string& name, const Tensor& param,
              const Tensor& grad) override;

 private:
  SgdOptions options_;
};

}  // namespace fitgrad::optim
