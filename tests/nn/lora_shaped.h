// A LoRA-shaped Linear for the tests of the Linear factory and of target_modules: a dense
// base (child "base_layer") plus two trainable factors, y = base(x) + (x A^T) B^T with
// A (r, in) ~ normal(0, 0.02) and B (out, r) zero, so that at build it equals its base. The
// real LoRA layer (PEFT's init and scaling) is the QLoRA issue's.
#pragma once

#include "autograd/functions.h"
#include "nn/layers.h"

namespace fitgrad::nn::test_layers {

class LoraShaped final : public LinearLayer {
 public:
  LoraShaped(const LinearSpec& spec, int64_t r, BuildContext& ctx)
      : LinearLayer(spec.path, spec.name, spec.in, spec.out) {
    base_ = &register_module<Linear>("base_layer", spec.in, spec.out, spec.options, ctx);
    a_ = register_parameter("lora_A", {r, spec.in}, Init::normal(0.02), ctx);
    b_ = register_parameter("lora_B", {spec.out, r}, Init::zeros(), ctx);
  }
  Tensor forward(const Tensor& x) const override {
    ForwardScope scope(*this);
    return autograd::add(base_->forward(x),
                         autograd::linear(autograd::linear(x, a_, Tensor()), b_, Tensor()));
  }

 private:
  Linear* base_;
  Tensor a_, b_;
};

}  // namespace fitgrad::nn::test_layers
