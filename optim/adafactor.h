// Adafactor (Shazeer & Stern 2018, "Adafactor: Adaptive Learning Rates with Sublinear Memory
// Cost") in the two variants users meet: torch.optim.Adafactor (PyTorch >= 2.5), behind
// `--optim adafactor`, and Hugging Face transformers' Adafactor, behind `--optim
// adafactor_hf`. Both keep no first moment by default and factor the second moment of a
// matrix (of every parameter with >= 2 dims, over its last two) into a row vector and a
// column vector, so an R x C weight costs R + C floats of state instead of 2 R C; vectors
// and scalars keep a full second moment. The arithmetic is tensor/cpu/adafactor.h's.
//
// Note [Two Adafactors]
// They differ in more than defaults. torch: lr (1e-2) caps the relative step rho_t =
// min(lr, 1/sqrt(t)), the step is max(eps2, rms(p)) rho_t, weight decay is decoupled and
// scaled by lr, the EMA weight of the new squared gradient is t^beta2_decay, and eps1 (the
// dtype's epsilon unless given) floors the variance estimate and its row mean rather than
// being added to g^2. HF: eps1 (1e-30) is added to g^2, the row factor is normalised by its
// own mean, the update is clipped to rms <= clip_threshold, the step is lr (or the relative
// step min(1e-2, 1/sqrt(t)), times max(eps2, rms(p)) with scale_parameter), an optional
// beta1 keeps a first moment of the scaled update, and weight decay is scaled by the step.
// HF refuses an explicit lr together with relative_step, and warmup_init without it; so
// does fitgrad. tests/golden/gen_adafactor_golden.py holds independent NumPy references of
// both (checked against torch 2.5.1 and transformers 4.30.2 to 1e-15 in float64).
//
// State (Note [Declared optimizer state]): torch's "row_var" (shape with the last dim 1)
// and "col_var" (the second-to-last dim 1), or "variance"; HF's "exp_avg_sq_row" (shape
// without the last dim), "exp_avg_sq_col" (without the second-to-last), or "exp_avg_sq",
// and "exp_avg" with beta1. All f32.
#pragma once

#include <optional>

#include "optim/optimizer.h"

namespace fitgrad::optim {

struct AdafactorOptions {  // torch.optim.Adafactor's defaults
  double lr = 1e-2, beta2_decay = -0.8;
  std::optional<double> eps1;  // none: the parameter dtype's machine epsilon
  double eps2 = 1e-3, d = 1.0;
  double weight_decay = 0.0;  // for groups built from options alone
};

class Adafactor : public Optimizer {
 public:
  Adafactor(std::vector<ParamGroup> groups, const AdafactorOptions& options);
  std::string name() const override { return "adafactor"; }
  const AdafactorOptions& options() const { return options_; }

 protected:
  void update(size_t index, const ParamGroup& group, const std::string& name, const Tensor& param,
              const Tensor& grad) override;

 private:
  AdafactorOptions options_;
};

struct AdafactorHFOptions {  // transformers.optimization.Adafactor's defaults
  std::optional<double> lr;  // must be unset with relative_step
  double eps1 = 1e-30, eps2 = 1e-3, clip_threshold = 1.0, decay_rate = -0.8;
  std::optional<double> beta1;
  double weight_decay = 0.0;  // for groups built from options alone
  bool scale_parameter = true, relative_step = true, warmup_init = false;
};

class AdafactorHF : public Optimizer {
 public:
  AdafactorHF(std::vector<ParamGroup> groups, const AdafactorHFOptions& options);
  std::string name() const override { return "adafactor_hf"; }
  const AdafactorHFOptions& options() const { return options_; }

 protected:
  void update(size_t index, const ParamGroup& group, const std::string& name, const Tensor& param,
              const Tensor& grad) override;

 private:
  AdafactorHFOptions options_;
};

}  // namespace fitgrad::optim
