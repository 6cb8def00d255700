// Adam8bit (see adam8bit.h).
#include "optim/adam8bit.h"

#include <cmath>

#include "tensor/backend/kernel_table.h"
#include "tensor/error.h"
#include "tensor/ops/optim_update.h"

namespace fitgrad::optim {
std::vector<StateSpec> adam8bit_specs(const Shape& shape, int64_t min_8bit_size) {
  const int64_t n = numel(shape);
  if (n < min_8bit_size)
    return {{.name = "state1", .shape = shape}, {.name = "state2", .shape = shape}};
  const int64_t blocks = (n + backend::kAdam8bitBlock - 1) / backend::kAdam8bitBlock;
  return {{.name = "state1", .shape = shape, .dtype = DType::u8},
          {.name = "state2", .shape = shape, .dtype = DType::u8},
          {.name = "absmax1", .shape = {blocks}},
          {.name = "absmax2", .shape = {blocks}}};
}

backend::Adam8bitScalars adam8bit_scalars(const Adam8bitOptions& o, double learning_rate,
                                          double weight_decay, int64_t step) {
  // bitsandbytes passes its hyperparameters as f32; the bias corrections are computed in
  // double from those f32 values and rounded once, the products in f32.
  const float lr = float(learning_rate), beta1 = float(o.beta1), beta2 = float(o.beta2);
  const float eps = float(o.eps), wd = float(weight_decay);
  const double t = double(step);
  const float c1 = float(1.0 - std::pow(double(beta1), t));
  const float c2 = float(std::sqrt(1.0 - std::pow(double(beta2), t)));
  return {beta1,           1.0f - beta1, beta2,          1.0f - beta2,
          (-lr * c2) / c1, eps * c2,     1.0f - lr * wd, wd > 0.0f};
}

Adam8bit::Adam8bit(std::vector<ParamGroup> groups, const Adam8bitOptions& options, std::string name)
    : Optimizer(std::move(groups), options.lr, "adam8bit",
                [m = options.min_8bit_size](const std::string&, const Tensor& p) {
                  return adam8bit_specs(p.shape(), m);
                }),
      options_(options),
      name_(std::move(name)) {
  FG_CHECK(options.beta1 >= 0 && options.beta1 < 1, "[adam8bit] beta1 must be in [0, 1), got {}",
           options.beta1);
  FG_CHECK(options.beta2 >= 0 && options.beta2 < 1, "[adam8bit] beta2 must be in [0, 1), got {}",
           options.beta2);
  FG_CHECK(options.eps >= 0, "[adam8bit] eps must be >= 0, got {}", options.eps);
  FG_CHECK(options.min_8bit_size >= 0, "[adam8bit] min_8bit_size must be >= 0, got {}",
           options.min_8bit_size);
}

void Adam8bit::update(size_t i, const ParamGroup& group, const std::string&, const Tensor& p,
                      const Tensor& g) {
  backend::require_kernel(backend::OpId::adam8bit_update, p.device());
  const Tensor grad = g.contiguous();
  // Note [Non-finite gradients in Adam8bit]; on meta the sum is 0 and the workspace is the
  // real run's.
  if (!std::isfinite(ops::sum_squares(grad))) return;
  ParamStates::State& s = states_.begin_update(i);
  const backend::Adam8bitScalars k = adam8bit_scalars(options_, lr_, group.weight_decay, s.step);
  const bool quantized = s.buffers.size() == 4;
  ops::adam8bit_update_(p, grad, s.buffers[0], s.buffers[1], quantized ? s.buffers[2] : Tensor(),
                        quantized ? s.buffers[3] : Tensor(), k, rounding(p));
}

}  // namespace fitgrad::optim
