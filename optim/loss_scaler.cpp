// The dynamic loss scaler (see loss_scaler.h).
#include "optim/loss_scaler.h"

#include <fmt/format.h>

#include <cmath>

#include "autograd/variable.h"
#include "tensor/error.h"
#include "tensor/ops/optim_update.h"

namespace fitgrad::optim {

LossScaler::LossScaler(const LossScalerOptions& o) : options_(o), scale_(float(o.init_scale)) {
  FG_CHECK(std::isfinite(o.init_scale) && o.init_scale > 0,
           "[loss_scaler] init_scale must be a finite number > 0, got {}", o.init_scale);
  FG_CHECK(std::isfinite(o.growth_factor) && o.growth_factor > 1,
           "[loss_scaler] growth_factor must be a finite number > 1, got {}", o.growth_factor);
  FG_CHECK(o.backoff_factor > 0 && o.backoff_factor < 1,
           "[loss_scaler] backoff_factor must be in (0, 1), got {}", o.backoff_factor);
  FG_CHECK(o.growth_interval >= 1, "[loss_scaler] growth_interval must be >= 1, got {}",
           o.growth_interval);
}

bool LossScaler::unscale_and_check(const std::vector<Tensor>& params) const {
  const float inv_scale = float(1.0 / double(scale_));  // GradScaler: double reciprocal, f32
  Tensor squares;  // one double on the gradients' device: inf or NaN exactly when one holds one
  for (const Tensor& p : params) {
    Tensor g = autograd::grad(p);
    if (!g.defined()) continue;
    FG_CHECK(g.is_contiguous(), "[loss_scaler] a gradient must be contiguous");
    if (!squares.defined()) squares = ops::zero_doubles(1, g.device());
    ops::sum_squares_add_(g, squares);
    ops::scale_(g, inv_scale);
  }
  // Note [The loss scaler's one read]: the skip is decided on the host.
  return squares.defined() && squares.device().has_bytes() &&
         !std::isfinite(ops::read_double(squares));
}

void LossScaler::update(bool found_inf) {
  if (found_inf) {
    scale_ = float(double(scale_) * options_.backoff_factor);
    growth_tracker_ = 0;
    return;
  }
  if (++growth_tracker_ == options_.growth_interval) {
    const float grown = float(double(scale_) * options_.growth_factor);
    if (std::isfinite(grown)) scale_ = grown;
    growth_tracker_ = 0;
  }
}

std::map<std::string, Tensor> LossScaler::state_dict() const {
  return {{"scale", Tensor::full({}, double(scale_), DType::f32)},
          {"growth_tracker", Tensor::full({}, double(growth_tracker_), DType::i64)}};
}

void LossScaler::load_state_dict(const std::map<std::string, Tensor>& state) {
  auto scalar = [&](const char* key, DType dtype) {
    const auto it = state.find(key);
    FG_CHECK(it != state.end(), "[loss_scaler] load_state_dict: missing '{}'", key);
    const Tensor& t = it->second;
    FG_CHECK(t.defined() && t.numel() == 1 && t.dtype() == dtype && t.device().has_bytes(),
             "[loss_scaler] load_state_dict: '{}' must be a {} scalar", key, dtype_name(dtype));
    return t.to(Device::cpu()).item();
  };
  const double scale = scalar("scale", DType::f32);
  const double tracker = scalar("growth_tracker", DType::i64);
  FG_CHECK(std::isfinite(scale) && scale > 0,
           "[loss_scaler] load_state_dict: 'scale' must be finite and > 0, got {}", scale);
  FG_CHECK(tracker >= 0 && tracker < double(options_.growth_interval),
           "[loss_scaler] load_state_dict: 'growth_tracker' must be in [0, {}), got {}",
           options_.growth_interval, tracker);
  scale_ = float(scale);
  growth_tracker_ = int64_t(tracker);
}

}  // namespace fitgrad::optim
