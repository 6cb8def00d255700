// Per-parameter optimizer state shared by the optimizers: a step count and the state
// tensors its specs declare (Note [Declared optimizer state] in state_spec.h) for each
// parameter, created lazily, and the state_dict / load_state_dict that name them
// "<param>.<spec name>".
//
// Note [Optimizer state is lazy]
// As in torch, a parameter has no state until the first step that sees its gradient: then
// its state tensors are allocated as its specs say (AdamW's and SGD's: f32, the
// parameter's shape, on its device) under Category::optimizer_state with the label
// "<param>.<spec name>" (set outright, so the caller's scope does not prefix it), and the
// memory ledger shows them from that step on. On meta the same allocations happen and
// nothing is computed. AdamW's moments are f32 whatever the parameter's dtype: torch keeps
// bf16/f16 states for bf16/f16 parameters, fitgrad keeps f32 ones, which costs 8 bytes per
// element instead of 4 but keeps the moments from underflowing or stalling in 8 bits of
// mantissa. Step counts are plain integers (no allocation), so the ledger's
// optimizer_state is exactly the state tensors; state_dict exports them as i64 scalars
// "<param>.step", plus the optimizer's own count as "step".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "optim/state_spec.h"
#include "tensor/tensor.h"

namespace fitgrad::optim {

class ParamStates {
 public:
  struct State {
    int64_t step = 0;             // steps this parameter took; 0: no state yet
    std::vector<Tensor> buffers;  // one per spec, in spec order; empty while step == 0
  };

  // One state per parameter of `params` (full name, tensor), in that order; `specs` gives
  // each parameter's state tensors; `op` starts errors.
  ParamStates(const char* op, std::vector<std::pair<std::string, Tensor>> params,
              const StateSpecFn& specs);

  size_t size() const { return states_.size(); }
  const std::string& param_name(size_t i) const { return params_[i].first; }
  const Tensor& param(size_t i) const { return params_[i].second; }
  const std::vector<StateSpec>& specs(size_t i) const { return specs_[i]; }
  State& operator[](size_t i) { return states_[i]; }
  const State& operator[](size_t i) const { return states_[i]; }

  // Allocates parameter i's state tensors (Note [Optimizer state is lazy]), each filled
  // with its spec's init when `initialise` (else uninitialised, for a load to overwrite).
  void allocate(size_t i, bool initialise);
  // The start of parameter i's update: allocates and initialises its state at its first
  // step, counts the step, and returns the state (step is then 1 at the first step).
  State& begin_update(size_t i);

  // See Optimizer::state_dict; `steps` is the optimizer's own count.
  std::map<std::string, Tensor> state_dict(int64_t steps) const;
  // Checks everything first and throws one error naming every missing, unexpected and
  // misshaped or mistyped entry (against the specs); then replaces the whole state (a parameter absent from `state` has
  // none afterwards, as in torch) and returns the optimizer's count "step".
  int64_t load_state_dict(const std::map<std::string, Tensor>& state);

 private:
  const char* op_;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::vector<StateSpec>> specs_;  // per parameter
  std::vector<State> states_;
};

}  // namespace fitgrad::optim
