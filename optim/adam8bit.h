// Adam8bit and AdamW8bit with bitsandbytes' semantics (>= 0.44; Dettmers et al. 2022): both
// moments stored as 8-bit codes in blocks of 256 values with an f32 absmax per block, the
// first moment in the signed dynamic map and the second in the unsigned one
// (tensor/quant/dynamic_map.h), dequantized, updated and requantized to the nearest code at
// every step (Note [Adam8bit kernel] in tensor/cpu/adam8bit.cpp). A parameter with fewer
// than min_8bit_size (4,096) elements keeps f32 state and takes bitsandbytes' 32-bit
// kernel. Weight decay is decoupled and applied after the Adam step (p *= 1 - lr * wd), as
// bitsandbytes' kernels do; AdamW8bit is the same optimizer with weight decay 0.01 by
// default, Adam8bit with 0 (the groups' own decay rules when built from groups).
//
// State per parameter (Note [Declared optimizer state]), under bitsandbytes' names:
// "state1", "state2" (u8, the parameter's shape) and "absmax1", "absmax2" (f32,
// ceil(numel / 256)); or "state1", "state2" in f32 for a small tensor. That is 2 bytes per
// element plus 8 bytes per 256: 2.03 bytes per parameter against AdamW's 8.
//
// Note [Non-finite gradients in Adam8bit]
// A parameter whose gradient holds an inf or a NaN is left untouched that step: its values,
// codes, absmaxes and step count are as before, as if it had no gradient. bitsandbytes'
// CUDA kernel decides per element (the parameter element is kept, its two state values are
// zeroed, and the rest of the block is requantized against a new absmax); skipping the
// whole tensor keeps the state it has accumulated, which a zeroed element would lose. The
// check is one read of the gradient (ops::sum_squares, whose sum is finite exactly when
// every element is).
#pragma once

#include <cstdint>

#include "optim/optimizer.h"

namespace fitgrad::optim {

struct Adam8bitOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0.0;  // for groups built from options alone
  int64_t min_8bit_size = 4096;
};

// The state of a parameter of `shape` (the names above), 8-bit from min_8bit_size elements.
std::vector<StateSpec> adam8bit_specs(const Shape& shape, int64_t min_8bit_size);
// The kernel's scalars of one step: learning rate lr, the group's weight decay, the
// parameter's step count t (1 at its first step).
backend::Adam8bitScalars adam8bit_scalars(const Adam8bitOptions& o, double lr, double weight_decay,
                                          int64_t t);

class Adam8bit : public Optimizer {
 public:
  // `name` is what name() reports ("adamw_8bit", "adam8bit", ...).
  Adam8bit(std::vector<ParamGroup> groups, const Adam8bitOptions& options,
           std::string name = "adamw_8bit");

  std::string name() const override { return name_; }
  const Adam8bitOptions& options() const { return options_; }

 protected:
  void update(size_t index, const ParamGroup& group, const std::string& name, const Tensor& param,
              const Tensor& grad) override;

 private:
  Adam8bitOptions options_;
  std::string name_;
};

}  // namespace fitgrad::optim
