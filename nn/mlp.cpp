// Gpt2Mlp and SwiGluMlp (mlp.h).
#include "nn/mlp.h"

#include "autograd/functions.h"

namespace fitgrad::nn {

namespace ag = fitgrad::autograd;

Gpt2Mlp::Gpt2Mlp(std::string path, std::string name, const ModelConfig& cfg, BuildContext& ctx)
    : Module(std::move(path), std::move(name)), resid_pdrop_(cfg.resid_pdrop) {
  const int64_t c = cfg.hidden_size, f = cfg.intermediate_size;
  using L = Linear::Layout;
  c_fc_ =
      &register_linear("c_fc", c, f, Linear::Options{true, L::conv1d, cfg.initializer_range}, ctx);
  c_proj_ = &register_linear("c_proj", f, c,
                             Linear::Options{true, L::conv1d, cfg.residual_init_std()}, ctx);
}

Tensor Gpt2Mlp::forward(const Tensor& x) const {
  ForwardScope scope(*this);
  return dropout_in_training(*this, c_proj_->forward(ag::gelu(c_fc_->forward(x))), resid_pdrop_);
}

SwiGluMlp::SwiGluMlp(std::string path, std::string name, const ModelConfig& cfg, BuildContext& ctx)
    : Module(std::move(path), std::move(name)), geglu_(cfg.gemma) {
  const int64_t c = cfg.hidden_size, f = cfg.intermediate_size;
  const Linear::Options opt{cfg.mlp_bias, Linear::Layout::torch, cfg.initializer_range};
  if (cfg.fused_projections) {
    gate_up_proj_ = &register_linear("gate_up_proj", c, 2 * f, opt, ctx);
  } else {
    gate_proj_ = &register_linear("gate_proj", c, f, opt, ctx);
    up_proj_ = &register_linear("up_proj", c, f, opt, ctx);
  }
  down_proj_ = &register_linear(
      "down_proj", f, c,
      Linear::Options{cfg.mlp_bias, Linear::Layout::torch, cfg.residual_init_std()}, ctx);
}

Tensor SwiGluMlp::forward(const Tensor& x) const {
  ForwardScope scope(*this);
  if (gate_up_proj_ != nullptr) {  // Phi-3: (B, T, 2F), gate then up
    const Tensor y = gate_up_proj_->forward(x);
    const int64_t f = y.size(-1) / 2;
    return down_proj_->forward(ag::swiglu(ag::narrow(y, -1, 0, f), ag::narrow(y, -1, f, f)));
  }
  if (geglu_)  // Gemma: gelu_pytorch_tanh(gate) * up
    return down_proj_->forward(ag::mul(ag::gelu(gate_proj_->forward(x)), up_proj_->forward(x)));
  return down_proj_->forward(ag::swiglu(gate_proj_->forward(x), up_proj_->forward(x)));
}

}  // namespace fitgrad::nn
