// Gradient clipping (see clip.h).
#include "optim/clip.h"

#include <cmath>
#include <utility>

#include "autograd/variable.h"
#include "tensor/error.h"
#include "tensor/ops/optim_update.h"

namespace fitgrad::optim {

void clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, const Tensor& sum_sq,
                     const std::function<void(const Tensor&)>& reduce) {
  FG_CHECK(max_norm > 0, "[clip_grad_norm] max_norm must be > 0, got {}", max_norm);
  std::vector<std::pair<Tensor, Tensor>> grads;  // (gradient, it or a contiguous copy)
  for (const Tensor& p : params) {
    Tensor g = autograd::grad(p);
    if (!g.defined()) continue;
    FG_CHECK(is_floating(g.dtype()), "[clip_grad_norm] gradient must be floating, got {}",
             dtype_name(g.dtype()));
    FG_CHECK(g.device() == sum_sq.device(),
             "[clip_grad_norm] a gradient on {} and the norm's accumulator on {}: every "
             "gradient must be on one device",
             g.device().str(), sum_sq.device().str());
    grads.emplace_back(g, g.contiguous());
  }
  for (const auto& [g, c] : grads) ops::sum_squares_add_(c, sum_sq);
  if (reduce) reduce(sum_sq);
  for (auto& [g, c] : grads) {
    ops::clip_scale_(c, sum_sq, max_norm);
    if (!c.same(g)) g.copy_(c);
  }
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  Device device = Device::cpu();
  for (const Tensor& p : params)
    if (const Tensor g = autograd::grad(p); g.defined()) {
      device = g.device();
      break;
    }
  const Tensor sum_sq = ops::zero_doubles(1, device);
  clip_grad_norm_(params, max_norm, sum_sq);
  return std::sqrt(ops::read_double(sum_sq));
}

}  // namespace fitgrad::optim
