// LoRA layers (see lora.h).
#include "nn/lora.h"

#include <algorithm>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "tensor/error.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/matmul.h"

namespace fitgrad::nn {
namespace {

LinearOptions factor_options() {
  LinearOptions o;
  o.bias = false;
  return o;
}

}  // namespace

LoraLinear::LoraLinear(const LinearSpec& spec, const LoraConfig& config, BuildContext& ctx,
                       const LinearFactory& base)
    : LinearLayer(spec.path, spec.name, spec.in, spec.out), config_(config) {
  FG_CHECK(config.r >= 1, "[lora] {}: r must be >= 1, got {}", spec.path, config.r);
  FG_CHECK(std::isfinite(config.alpha) && config.alpha > 0,
           "[lora] {}: lora_alpha must be > 0, got {}", spec.path, config.alpha);
  FG_CHECK(config.dropout >= 0 && config.dropout < 1,
           "[lora] {}: lora_dropout must be in [0, 1), got {}", spec.path, config.dropout);
  const LinearSpec base_spec{child_path("base_layer"), "base_layer", spec.in, spec.out,
                             spec.options};
  std::unique_ptr<LinearLayer> layer =
      base ? base(base_spec, ctx)
           : std::make_unique<Linear>(base_spec.path, base_spec.name, spec.in, spec.out,
                                      spec.options, ctx);
  base_ = &adopt_linear("base_layer", std::move(layer), base_spec);
  if (!base_->named_parameters().empty()) base_->freeze("*");
  a_ = &register_module<Linear>("lora_A", spec.in, config.r, factor_options(), ctx);
  b_ = &register_module<Linear>("lora_B", config.r, spec.out, factor_options(), ctx);
  // PEFT: kaiming_uniform_(A, a=sqrt(5)) is U(-1/sqrt(in), 1/sqrt(in)); B = 0.
  Tensor a = a_->weight(), b = b_->weight();
  init_tensor(a, Init::uniform(1.0 / std::sqrt(double(spec.in))), ctx.generator());
  init_tensor(b, Init::zeros(), ctx.generator());
}

Tensor LoraLinear::forward(const Tensor& x) const {
  ForwardScope scope(*this);
  Tensor y = base_->forward(x);
  if (merged_) return y;
  const Tensor h = b_->forward(a_->forward(dropout_in_training(*this, x, config_.dropout)));
  return autograd::add(y, autograd::scale(h, config_.scaling()));
}

Tensor LoraLinear::delta() const {
  // (out, r) @ (r, in) = (out, in), in f32 whatever the factors' dtype.
  const Tensor ba =
      ops::scale(ops::matmul(lora_B().to(DType::f32), lora_A().to(DType::f32)), config_.scaling());
  const auto* dense = dynamic_cast<const Linear*>(base_);
  FG_CHECK(dense, "[lora] {}: merging needs a dense base layer", path());
  return dense->weight().shape()[0] == out_features() ? ba : ba.transpose(0, 1).contiguous();
}

namespace {

// w += sign * delta (rounded to w's dtype); the largest |change| actually made.
double add_into(const Tensor& w, const Tensor& delta, double sign) {
  autograd::NoGradGuard no_grad;
  const Tensor before = w.to(DType::f32).clone();  // to() of an f32 tensor is itself
  Tensor target = w;
  ops::add_(target, ops::scale(delta, sign).to(w.dtype()));
  const Tensor change = ops::sub(w.to(DType::f32), before);
  double largest = 0;
  const Tensor c = change.contiguous();
  for (int64_t i = 0; i < c.numel(); ++i)
    largest = std::max(largest, double(std::fabs(c.data<float>()[i])));
  return largest;
}

}  // namespace

double LoraLinear::merge() {
  FG_CHECK(!merged_, "[lora] {} is already merged", path());
  const double changed = add_into(dynamic_cast<const Linear&>(*base_).weight(), delta(), 1.0);
  merged_ = true;
  return changed;
}

double LoraLinear::unmerge() {
  FG_CHECK(merged_, "[lora] {} is not merged", path());
  const double changed = add_into(dynamic_cast<const Linear&>(*base_).weight(), delta(), -1.0);
  merged_ = false;
  return changed;
}

LinearFactory lora_factory(const LoraConfig& config, LinearFactory base) {
  return [config, base = std::move(base)](const LinearSpec& spec,
                                          BuildContext& ctx) -> std::unique_ptr<LinearLayer> {
    return std::make_unique<LoraLinear>(spec, config, ctx, base);
  };
}

int64_t mark_only_lora_as_trainable(const Module& model) {
  model.freeze("*");
  int64_t factors = 0;
  for (const auto& [path, m] : model.named_modules())
    if (const auto* lora = dynamic_cast<const LoraLinear*>(m)) {
      factors += lora->lora_A().numel() + lora->lora_B().numel();
      model.unfreeze(path + ".lora_A.weight");
      model.unfreeze(path + ".lora_B.weight");
    }
  FG_CHECK(factors > 0, "[lora] the model has no LoRA layer to train");
  return factors;
}

}  // namespace fitgrad::nn
