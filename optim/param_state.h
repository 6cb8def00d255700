// Per-parameter optimizer state shared by the optimizers: a step count and named fp32
// buffers for each parameter, created lazily, and the state_dict / load_state_dict that
// name them "<param>.<buffer>".
//
// Note [Optimizer state is lazy]
// As in torch, a parameter has no state until the first step that sees its gradient: then
// its buffers are allocated on the parameter's device, f32 and of the parameter's shape,
// under Category::optimizer_state with the label "<param>.<buffer>" (set outright, so the
// caller's scope does not prefix it), and the memory ledger shows them from that step on.
// On meta the same allocations happen and nothing is computed. The buffers are f32 whatever
// the parameter's dtype: torch keeps bf16/f16 states for bf16/f16 parameters, fitgrad keeps
// f32 ones, which costs 8 bytes per element instead of 4 but keeps the moments from
// underflowing or stalling in 8 bits of mantissa. Step counts are plain integers (no
// allocation), so the ledger's optimizer_state is exactly the buffers; state_dict exports
// them as i64 scalars "<param>.step", plus the optimizer's own count as "step".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "optim/optimizer.h"
#include "tensor/tensor.h"

namespace fitgrad::optim {

class ParamStates {
 public:
  struct State {
    int64_t step = 0;             // steps this parameter took; 0: no state yet
    std::vector<Tensor> buffers;  // f32, the parameter's shape; empty while step == 0
  };

  // One state per parameter of `groups`, flattened in group order. `buffers` names the
  // state tensors each parameter gets ({"exp_avg", "exp_avg_sq"}); `op` starts errors.
  ParamStates(const char* op, const std::vector<ParamGroup>& groups,
              std::vector<std::string> buffers);

  size_t size() const { return states_.size(); }
  const std::string& param_name(size_t i) const { return params_[i].first; }
  const Tensor& param(size_t i) const { return params_[i].second; }
  State& operator[](size_t i) { return states_[i]; }
  const State& operator[](size_t i) const { return states_[i]; }

  // Allocates parameter i's buffers (Note [Optimizer state is lazy]); zeroed when `zero`,
  // otherwise uninitialised for a kernel that writes them on the first step.
  void allocate(size_t i, bool zero);

  // See Optimizer::state_dict; `steps` is the optimizer's own count.
  std::map<std::string, Tensor> state_dict(int64_t steps) const;
  // Checks everything first and throws one error naming every missing, unexpected and
  // misshaped entry; then replaces the whole state (a parameter absent from `state` has
  // none afterwards, as in torch) and returns the optimizer's count "step".
  int64_t load_state_dict(const std::map<std::string, Tensor>& state);

 private:
  const char* op_;
  std::vector<std::string> buffer_names_;
  std::vector<std::pair<std::string, Tensor>> params_;  // flattened groups
  std::vector<State> states_;
};

}  // namespace fitgrad::optim
