// Optimizer steps on random gradients and a snapshot of what they changed, for the tests
// that compare two optimizers step for step (resume, seeds, precisions).
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/variable.h"
#include "optim/optimizer.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::testing {

// One step of `opt` after giving each parameter a gradient uniform in [-scale, scale],
// drawn from seed + the length of its name, in the parameter's dtype, on its device.
inline void step_with_grads(optim::Optimizer& opt, uint64_t seed, double scale) {
  for (const optim::ParamGroup& g : opt.groups())
    for (const auto& [name, p] : g.params)
      autograd::ensure_meta(p).grad =
          random_tensor(p.shape(), seed + name.size(), DType::f32, -scale, scale)
              .to(p.dtype())
              .to(p.device());
  opt.step();
}

// Every parameter, then every state entry, as doubles.
inline std::vector<std::vector<double>> snapshot(const optim::Optimizer& opt) {
  std::vector<std::vector<double>> out;
  for (const optim::ParamGroup& g : opt.groups())
    for (const auto& [name, p] : g.params) out.push_back(to_f64(p));
  for (const auto& [key, t] : opt.state_dict()) out.push_back(to_f64(t.to(DType::f32)));
  return out;
}

}  // namespace fitgrad::testing
