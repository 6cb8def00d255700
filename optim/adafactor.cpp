// Adafactor, torch's and Hugging Face's (see adafactor.h).
#include "optim/adafactor.h"

#include <algorithm>
#include <cmath>

#include "tensor/backend/kernel_table.h"
#include "tensor/error.h"
#include "tensor/ops/optim_update.h"

namespace fitgrad::optim {
namespace {

Shape with_dim(Shape s, size_t d, int64_t v) {
  s[d] = v;
  return s;
}
Shape without_dim(Shape s, size_t d) {
  s.erase(s.begin() + std::ptrdiff_t(d));
  return s;
}

std::vector<StateSpec> torch_specs(const std::string&, const Tensor& p) {
  const Shape& s = p.shape();
  if (p.dim() < 2) return {{.name = "variance", .shape = s}};
  const size_t last = s.size() - 1;
  return {{.name = "row_var", .shape = with_dim(s, last, 1)},
          {.name = "col_var", .shape = with_dim(s, last - 1, 1)}};
}

StateSpecFn hf_specs(bool first_moment) {
  return [first_moment](const std::string&, const Tensor& p) {
    const Shape& s = p.shape();
    std::vector<StateSpec> specs;
    if (first_moment) specs.push_back({.name = "exp_avg", .shape = s});
    if (p.dim() < 2) {
      specs.push_back({.name = "exp_avg_sq", .shape = s});
    } else {
      const size_t last = s.size() - 1;
      specs.push_back({.name = "exp_avg_sq_row", .shape = without_dim(s, last)});
      specs.push_back({.name = "exp_avg_sq_col", .shape = without_dim(s, last - 1)});
    }
    return specs;
  };
}

double machine_epsilon(DType t) {
  switch (t) {
    case DType::bf16: return 0x1p-7;
    case DType::f16: return 0x1p-10;
    default: return 0x1p-23;
  }
}

}  // namespace

Adafactor::Adafactor(std::vector<ParamGroup> groups, const AdafactorOptions& options)
    : Optimizer(std::move(groups), options.lr, "adafactor", torch_specs), options_(options) {
  FG_CHECK(options.beta2_decay <= 0, "[adafactor] beta2_decay must be <= 0, got {}",
           options.beta2_decay);
  FG_CHECK(!options.eps1 || *options.eps1 >= 0, "[adafactor] eps1 must be >= 0, got {}",
           options.eps1.value_or(0));
  FG_CHECK(options.eps2 >= 0, "[adafactor] eps2 must be >= 0, got {}", options.eps2);
  FG_CHECK(options.d >= 1, "[adafactor] the clipping threshold d must be >= 1, got {}", options.d);
}

void Adafactor::update(size_t i, const ParamGroup& group, const std::string&, const Tensor& p,
                       const Tensor& g) {
  backend::require_kernel(backend::OpId::adafactor_update, p.device());
  ParamStates::State& s = states_.begin_update(i);
  const double t = double(s.step);
  backend::AdafactorScalars k;
  k.variant = backend::AdafactorVariant::torch;
  k.rho = std::min(lr_, 1.0 / std::sqrt(t));
  k.one_minus_beta2 = float(std::pow(t, options_.beta2_decay));
  k.eps1 = float(options_.eps1.value_or(machine_epsilon(p.dtype())));
  k.eps2 = options_.eps2;
  k.d = options_.d;
  k.decay = group.weight_decay != 0 ? float(1 - lr_ * group.weight_decay) : 1.0f;
  const bool factored = s.buffers.size() == 2;
  ops::adafactor_update_(p, g.contiguous(), factored ? s.buffers[0] : Tensor(),
                         factored ? s.buffers[1] : Tensor(), factored ? Tensor() : s.buffers[0],
                         Tensor(), k, rounding(p));
}

AdafactorHF::AdafactorHF(std::vector<ParamGroup> groups, const AdafactorHFOptions& options)
    : Optimizer(std::move(groups), options.lr.value_or(0.0), "adafactor_hf",
                hf_specs(options.beta1.has_value())),
      options_(options) {
  FG_CHECK(!(options.lr && options.relative_step),
           "[adafactor_hf] a manual lr cannot be combined with relative_step (as in "
           "transformers' Adafactor)");
  FG_CHECK(!options.warmup_init || options.relative_step,
           "[adafactor_hf] warmup_init needs relative_step");
  FG_CHECK(options.relative_step || options.lr,
           "[adafactor_hf] without relative_step a learning rate is needed");
  FG_CHECK(!options.beta1 || (*options.beta1 >= 0 && *options.beta1 < 1),
           "[adafactor_hf] beta1 must be in [0, 1), got {}", options.beta1.value_or(0));
  FG_CHECK(options.clip_threshold > 0, "[adafactor_hf] clip_threshold must be > 0, got {}",
           options.clip_threshold);
  FG_CHECK(options.decay_rate <= 0, "[adafactor_hf] decay_rate must be <= 0, got {}",
           options.decay_rate);
}

void AdafactorHF::update(size_t i, const ParamGroup& group, const std::string&, const Tensor& p,
                         const Tensor& g) {
  backend::require_kernel(backend::OpId::adafactor_update, p.device());
  ParamStates::State& s = states_.begin_update(i);
  const double t = double(s.step);
  backend::AdafactorScalars k;
  k.variant = backend::AdafactorVariant::hf;
  k.rel_step = options_.relative_step
                   ? std::min(options_.warmup_init ? 1e-6 * t : 1e-2, 1.0 / std::sqrt(t))
                   : lr_;
  k.scale_parameter = options_.scale_parameter;
  k.eps_scale = options_.eps2;
  k.beta2t = float(1.0 - std::pow(t, options_.decay_rate));
  k.eps0 = float(options_.eps1);
  k.clip_threshold = options_.clip_threshold;
  k.beta1 = options_.beta1 ? float(*options_.beta1) : -1.0f;
  k.weight_decay = group.weight_decay;
  const size_t m = options_.beta1 ? 1 : 0;  // exp_avg comes first
  const bool factored = s.buffers.size() == m + 2;
  ops::adafactor_update_(p, g.contiguous(), factored ? s.buffers[m] : Tensor(),
                         factored ? s.buffers[m + 1] : Tensor(), factored ? Tensor() : s.buffers[m],
                         m ? s.buffers[0] : Tensor(), k, rounding(p));
}

}  // namespace fitgrad::optim
