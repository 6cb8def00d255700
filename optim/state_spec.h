// The declared state of an optimizer: for each parameter, a list of specs that say what
// state tensors it gets (name, shape, dtype, placement, initial value). ParamStates
// allocates, saves and loads exactly what the specs say, so an optimizer whose state is not
// an f32 copy shaped like the parameter (8-bit moments with per-block absmax, a factored
// second moment, state kept in host memory) needs no allocation or checkpoint code of its
// own, and a planner can count the state's bytes without running a step.
//
// Note [Declared optimizer state]
// A spec's name is the suffix of its state_dict entry: parameter "h.0.mlp.c_fc.weight" with
// spec "exp_avg_sq_row" saves as "h.0.mlp.c_fc.weight.exp_avg_sq_row", and the ledger label
// is the same string. Specs are computed once per parameter when the optimizer is built
// (they may depend on the parameter's shape, dtype and size: Adam8bit keeps f32 state for
// small tensors, Adafactor factors matrices only). Loading checks each entry against its
// spec: the shape must be the spec's, an integer spec needs exactly its dtype (a u8 code
// cannot be converted), and a floating spec takes any floating dtype, converted on copy.
// Placement `host` puts the tensor in host memory whatever the parameter's device (on a
// meta parameter, a dry run, the state stays on meta so that nothing real is allocated).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace fitgrad::optim {

enum class StatePlacement { with_param, host };

struct StateSpec {
  std::string name;  // "exp_avg", "state1", "absmax1", "exp_avg_sq_row", ...
  Shape shape;
  DType dtype = DType::f32;
  StatePlacement placement = StatePlacement::with_param;
  // The value every element starts at; nullopt when the first update writes every element
  // (SGD's momentum buffer starts as the first gradient).
  std::optional<double> init = 0.0;
};

// The specs of one parameter, given its full name and tensor.
using StateSpecFn = std::function<std::vector<StateSpec>(const std::string&, const Tensor&)>;

// The device a spec's tensor lives on, for a parameter on `param_device`.
Device state_device(const StateSpec& spec, Device param_device);
// The bytes the specs' tensors take (before any allocator rounding).
int64_t state_bytes(const std::vector<StateSpec>& specs);

}  // namespace fitgrad::optim
