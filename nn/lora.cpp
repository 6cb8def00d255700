// LoRA layers (see lora.h).
#include "nn/lora.h"

#include <algorithm>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "nn/nf4_linear.h"
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

namespace {
thread_local bool adapters_off = false;
}  // namespace

AdaptersOff::AdaptersOff() : previous_(adapters_off) { adapters_off = true; }
AdaptersOff::~AdaptersOff() { adapters_off = previous_; }
bool AdaptersOff::active() { return adapters_off; }

Tensor LoraLinear::forward(const Tensor& x) const {
  ForwardScope scope(*this);
  FG_CHECK(!(merged_ && adapters_off),
           "[lora] {} is merged into its base: its adapter cannot be switched off", path());
  Tensor y = base_->forward(x);
  if (merged_ || adapters_off) return y;
  const Tensor h = b_->forward(a_->forward(dropout_in_training(*this, x, config_.dropout)));
  return autograd::add(y, autograd::scale(h, config_.scaling()));
}

Tensor LoraLinear::delta() const {
  // (out, r) @ (r, in) = (out, in), in f32 whatever the factors' dtype.
  return ops::scale(ops::matmul(lora_B().to(DType::f32), lora_A().to(DType::f32)),
                    config_.scaling());
}

namespace {

double max_abs(const Tensor& t) {
  const Tensor c = t.to(Device::cpu()).contiguous();
  double m = 0;
  for (int64_t i = 0; i < c.numel(); ++i) m = std::max(m, double(std::fabs(c.data<float>()[i])));
  return m;
}

}  // namespace

// Note [Merging into a quantized base]
// A dense base takes w += sign * delta in its own dtype. An NF4 base is dequantized to f32,
// takes the delta and is quantized again, as PEFT merges into a bitsandbytes 4-bit layer;
// the requantization moves the weight off w + delta, and the returned figure is the largest
// such error |dequantize(quantize(w + delta)) - (w + delta)|, so a caller can report what
// merging cost. Unmerging an NF4 base subtracts the delta the same way and is lossy too.
double LoraLinear::apply_delta(double sign) {
  autograd::NoGradGuard no_grad;
  const Tensor d = ops::scale(delta(), sign);  // (out, in)
  if (auto* nf4 = dynamic_cast<Nf4Linear*>(base_)) {
    const Tensor target = ops::add(nf4->dequantized(DType::f32), d);  // (out, in)
    const bool torch = nf4->layout() == LinearLayout::torch;
    nf4->quantize_from(torch ? target : target.transpose(0, 1));
    return max_abs(ops::sub(nf4->dequantized(DType::f32), target));
  }
  const auto* dense = dynamic_cast<const Linear*>(base_);
  FG_CHECK(dense, "[lora] {}: merging needs a dense or NF4 base layer", path());
  const Tensor& w = dense->weight();
  const Tensor dw = w.shape()[0] == out_features() ? d : d.transpose(0, 1).contiguous();
  const Tensor before = w.to(DType::f32).clone();  // to() of an f32 tensor is itself
  Tensor target = w;
  ops::add_(target, dw.to(w.dtype()));
  return max_abs(ops::sub(ops::sub(w.to(DType::f32), before), dw));
}

double LoraLinear::merge() {
  FG_CHECK(!merged_, "[lora] {} is already merged", path());
  const double err = apply_delta(1.0);
  merged_ = true;
  return err;
}

double LoraLinear::unmerge() {
  FG_CHECK(merged_, "[lora] {} is not merged", path());
  const double err = apply_delta(-1.0);
  merged_ = false;
  return err;
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
