// Gradient clipping (see clip.h).
#include "optim/clip.h"

#include <cmath>
#include <utility>

#include "autograd/variable.h"
#include "tensor/error.h"
#include "tensor/ops/optim_update.h"

namespace fitgrad::optim {

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  FG_CHECK(max_norm > 0, "[clip_grad_norm] max_norm must be > 0, got {}", max_norm);
  std::vector<std::pair<Tensor, Tensor>> grads;  // (gradient, it or a contiguous copy)
  for (const Tensor& p : params) {
    Tensor g = autograd::grad(p);
    if (!g.defined()) continue;
    FG_CHECK(is_floating(g.dtype()), "[clip_grad_norm] gradient must be floating, got {}",
             dtype_name(g.dtype()));
    grads.emplace_back(g, g.contiguous());
  }
  double sum = 0.0;
  for (const auto& [g, c] : grads) sum += ops::sum_squares(c);
  const double total = std::sqrt(sum);
  const double coef = max_norm / (total + 1e-6);
  if (!std::isfinite(total) || coef >= 1) return total;
  for (auto& [g, c] : grads) {
    ops::scale_(c, float(coef));
    if (!c.same(g)) g.copy_(c);
  }
  return total;
}

}  // namespace fitgrad::optim
