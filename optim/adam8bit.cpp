// Adam8bit (see adam8bit.h).
#include "optim/adam8bit.h"

#include <cmath>

#include "tensor/backend/kernel_table.h"
#include "tensor/error.h"
#include "tensor/ops/optim_update.h"

namespace fitgrad::optim {
namespace {

StateSpecFn adam8bit_specs(int64_t min_8bit_size) {
  return [min_8bit_size](const std::string&, const Tensor& p) {
    if (p.numel() < min_8bit_size)
      return std::vector<StateSpec>{{.name = "state1", .shape = p.shape()},
                                    {.name = "state2", .shape = p.shape()}};
    const int64_t blocks = (p.numel() + backend::kAdam8bitBlock - 1) / backend::kAdam8bitBlock;
    return std::vector<StateSpec>{{.name = "state1", .shape = p.shape(), .dtype = DType::u8},
                                  {.name = "state2", .shape = p.shape(), .dtype = DType::u8},
                                  {.name = "absmax1", .shape = {blocks}},
                                  {.name = "absmax2", .shape = {blocks}}};
  };
}

}  // namespace

Adam8bit::Adam8bit(std::vector<ParamGroup> groups, const Adam8bitOptions& options, std::string name)
    : Optimizer(std::move(groups), options.lr, "adam8bit", adam8bit_specs(options.min_8bit_size)),
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
  // bitsandbytes passes its hyperparameters as f32; the bias corrections are computed in
  // double from those f32 values and rounded once, the products in f32.
  const float lr = float(lr_), beta1 = float(options_.beta1), beta2 = float(options_.beta2);
  const float eps = float(options_.eps), wd = float(group.weight_decay);
  const double t = double(s.step);
  const float c1 = float(1.0 - std::pow(double(beta1), t));
  const float c2 = float(std::sqrt(1.0 - std::pow(double(beta2), t)));
  const backend::Adam8bitScalars k{beta1,           1.0f - beta1, beta2,          1.0f - beta2,
                                   (-lr * c2) / c1, eps * c2,     1.0f - lr * wd, wd > 0.0f};
  const bool quantized = s.buffers.size() == 4;
  ops::adam8bit_update_(p, grad, s.buffers[0], s.buffers[1], quantized ? s.buffers[2] : Tensor(),
                        quantized ? s.buffers[3] : Tensor(), k, rounding(p));
}

}  // namespace fitgrad::optim
