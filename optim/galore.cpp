// GaLore (see galore.h).
#include "optim/galore.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "optim/adam8bit.h"
#include "optim/target_modules.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/error.h"
#include "tensor/memory/scope.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/optim_update.h"
#include "tensor/ops/svd.h"

namespace fitgrad::optim {
namespace {

Adam8bitOptions eight_bit_options(const AdamWOptions& o) {
  Adam8bitOptions a;
  a.lr = o.lr;
  a.beta1 = o.beta1;
  a.beta2 = o.beta2;
  a.eps = o.eps;
  return a;
}

// The specs of every parameter: a target's low-rank moments and projection, AdamW's or
// Adam8bit's for the rest.
StateSpecFn galore_specs(const GaLoreOptions& galore, bool eight_bit) {
  check_galore_options(galore, eight_bit ? "galore_adamw_8bit" : "galore_adamw");
  return [galore, eight_bit](const std::string& name, const Tensor& p) {
    const int64_t min_8bit = Adam8bitOptions{}.min_8bit_size;
    if (!is_target_module(galore.target_modules, name, p))
      return eight_bit ? adam8bit_specs(p.shape(), min_8bit)
                       : std::vector<StateSpec>{{.name = "exp_avg", .shape = p.shape()},
                                                {.name = "exp_avg_sq", .shape = p.shape()}};
    const GaLoreLayout l = galore_layout(p.shape(), galore.rank);
    std::vector<StateSpec> specs =
        eight_bit ? adam8bit_specs(l.low, min_8bit)
                  : std::vector<StateSpec>{{.name = "exp_avg", .shape = l.low},
                                           {.name = "exp_avg_sq", .shape = l.low}};
    // Written by the first step's SVD, in the weight's dtype; an int8 weight's update runs on
    // its dequantized f32 copy (Note [Int8 updates] in optim/optimizer.h), so f32 there.
    const DType dtype = is_floating(p.dtype()) ? p.dtype() : DType::f32;
    specs.push_back(
        {.name = "projection", .shape = l.projection, .dtype = dtype, .init = std::nullopt});
    return specs;
  };
}

// True when the squares of t sum to a finite value, i.e. every element is finite; a host
// read (0 on meta).
bool all_finite(const Tensor& t) { return std::isfinite(ops::sum_squares(t)); }

}  // namespace

void check_galore_options(const GaLoreOptions& o, const std::string& op) {
  FG_CHECK(o.rank >= 1 && o.rank <= (int64_t(1) << 20), "[{}] rank must be in [1, 1048576], got {}",
           op, o.rank);
  FG_CHECK(o.update_proj_gap >= 1, "[{}] update_proj_gap must be >= 1, got {}", op,
           o.update_proj_gap);
  FG_CHECK(std::isfinite(o.scale) && o.scale > 0, "[{}] scale must be a finite number > 0, got {}",
           op, o.scale);
  FG_CHECK(!o.target_modules.empty(), "[{}] target_modules is empty", op);
  for (const std::string& t : o.target_modules)
    FG_CHECK(!t.empty(), "[{}] target_modules has an empty name", op);
}

GaLoreLayout galore_layout(const Shape& weight, int64_t rank) {
  FG_ASSERT(weight.size() == 2, "[galore] a target weight is a matrix");
  const int64_t m = weight[0], n = weight[1];
  GaLoreLayout l;
  l.left = m < n;
  l.rank = std::min({rank, m, n});
  l.low = l.left ? Shape{l.rank, n} : Shape{m, l.rank};
  l.projection = l.left ? Shape{m, l.rank} : Shape{l.rank, n};
  return l;
}

GaLore::GaLore(std::vector<ParamGroup> groups, const AdamWOptions& adam,
               const GaLoreOptions& galore, bool eight_bit)
    : Optimizer(std::move(groups), adam.lr, eight_bit ? "galore_adamw_8bit" : "galore_adamw",
                galore_specs(galore, eight_bit)),
      adam_(adam),
      galore_(galore),
      eight_bit_(eight_bit) {
  const std::string op = name();
  FG_CHECK(adam.beta1 >= 0 && adam.beta1 < 1, "[{}] beta1 must be in [0, 1), got {}", op,
           adam.beta1);
  FG_CHECK(adam.beta2 >= 0 && adam.beta2 < 1, "[{}] beta2 must be in [0, 1), got {}", op,
           adam.beta2);
  FG_CHECK(adam.eps >= 0, "[{}] eps must be >= 0, got {}", op, adam.eps);
  std::string first_name;
  for (const ParamGroup& g : groups_)
    for (const auto& [param_name, p] : g.params) {
      projected_.push_back(is_target_module(galore.target_modules, param_name, p) ? 1 : 0);
      if (first_name.empty() && p.dim() == 2) first_name = param_name;
    }
  FG_CHECK(std::find(projected_.begin(), projected_.end(), 1) != projected_.end(),
           "[{}] target_modules '{}' names no 2-D weight (2-D weights look like '{}')", op,
           fmt::join(galore.target_modules, ","), first_name.empty() ? "<none>" : first_name);
}

void GaLore::update(size_t i, const ParamGroup& group, const std::string& name, const Tensor& p,
                    const Tensor& g) {
  if (projected_[i]) return update_projected(i, group, name, p, g);
  const Tensor grad = g.contiguous();
  if (!eight_bit_) {
    backend::require_kernel(backend::OpId::adamw_update, p.device());
    ParamStates::State& s = states_.begin_update(i);
    ops::adamw_update_(p, grad, s.buffers[0], s.buffers[1],
                       adamw_scalars(adam_, lr_, group.weight_decay, s.step), rounding(p));
    return;
  }
  backend::require_kernel(backend::OpId::adam8bit_update, p.device());
  // Note [Non-finite gradients in Adam8bit], as Adam8bit does.
  if (!all_finite(grad)) return;
  ParamStates::State& s = states_.begin_update(i);
  const bool quantized = s.buffers.size() == 4;
  ops::adam8bit_update_(p, grad, s.buffers[0], s.buffers[1], quantized ? s.buffers[2] : Tensor(),
                        quantized ? s.buffers[3] : Tensor(),
                        adam8bit_scalars(eight_bit_options(adam_), lr_, group.weight_decay, s.step),
                        rounding(p));
}

void GaLore::update_projected(size_t i, const ParamGroup& group, const std::string& param_name,
                              const Tensor& p, const Tensor& g) {
  using backend::OpId;
  // Every kernel of the update, before anything changes.
  for (OpId op : {OpId::svd_basis, OpId::matmul, OpId::fill, OpId::sgd_update,
                  eight_bit_ ? OpId::adam8bit_update : OpId::adamw_update})
    backend::require_kernel(op, p.device());
  const GaLoreLayout l = galore_layout(p.shape(), galore_.rank);
  // G (m, n) in the projection's dtype, the weight's.
  const Tensor grad = g.dtype() == p.dtype() ? g.contiguous() : g.to(p.dtype());
  const bool refresh = states_[i].step % galore_.update_proj_gap == 0;
  if (eight_bit_ && !all_finite(grad)) return;  // Note [Non-finite gradients in Adam8bit]
  FG_CHECK(eight_bit_ || !refresh || all_finite(grad),
           "[{}] the gradient of '{}' has non-finite values at its step {}, where its "
           "projection is refreshed by an SVD",
           name(), param_name, states_[i].step);
  ParamStates::State& s = states_.begin_update(i);
  const Tensor& projection = s.buffers.back();  // P (m, r) or Q (r, n)
  if (refresh) ops::svd_basis_(grad, projection, l.left);

  const double lr = lr_, wd = group.weight_decay;
  const MemoryContextScope scope({Category::temporary, intern_label(param_name + ".galore")});
  // R: (r, n) = P^T G or (m, r) = G Q^T.
  const Tensor low = l.left ? ops::matmul(projection, grad, true, false)
                            : ops::matmul(grad, projection, false, true);
  // Note [Applying GaLore's update]: the low-rank step times (1 - lr wd) scale, f32.
  const Tensor step = Tensor::zeros(l.low, DType::f32, p.device());
  const double carried = galore_.scale * (1.0 - lr * wd);
  if (eight_bit_) {
    backend::Adam8bitScalars k = adam8bit_scalars(eight_bit_options(adam_), lr, 0.0, s.step);
    k.step_size = float(-double(k.step_size) * carried);  // bitsandbytes' is negative
    const bool quantized = s.buffers.size() == 5;
    ops::adam8bit_update_(step, low, s.buffers[0], s.buffers[1],
                          quantized ? s.buffers[2] : Tensor(), quantized ? s.buffers[3] : Tensor(),
                          k);
  } else {
    const double t = double(s.step);
    const double step_size =
        lr * std::sqrt(1 - std::pow(adam_.beta2, t)) / (1 - std::pow(adam_.beta1, t));
    const backend::AdamWScalars k{1.0f,
                                  float(adam_.beta1),
                                  float(1 - adam_.beta1),
                                  float(adam_.beta2),
                                  float(1 - adam_.beta2),
                                  1.0f,
                                  float(adam_.eps),
                                  float(step_size * carried)};
    ops::adamw_update_(step, low, s.buffers[0], s.buffers[1], k);
  }
  const Tensor n = step.dtype() == projection.dtype() ? step : step.to(projection.dtype());
  // D (m, n) = P N or N Q.
  const Tensor back = l.left ? ops::matmul(projection, n) : ops::matmul(n, projection);
  const backend::SgdScalars apply{1.0f, float(lr * wd), 0.0f, 1.0f, false, true};
  ops::sgd_update_(p, back, Tensor(), apply, rounding(p));
}

}  // namespace fitgrad::optim
