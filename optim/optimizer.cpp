// The Optimizer base and Hugging Face's decay grouping (see optimizer.h).
#include "optim/optimizer.h"

#include <cmath>
#include <set>

#include "autograd/variable.h"
#include "tensor/error.h"
#include "tensor/ops/op_util.h"

namespace fitgrad::optim {

std::vector<ParamGroup> decay_groups(const std::vector<std::pair<std::string, Tensor>>& named,
                                     double weight_decay) {
  std::vector<ParamGroup> groups(2);
  groups[0].weight_decay = weight_decay;
  groups[1].weight_decay = 0.0;
  for (const auto& [name, t] : named) groups[t.dim() == 1 ? 1 : 0].params.emplace_back(name, t);
  return groups;
}

Optimizer::Optimizer(std::vector<ParamGroup> groups, double lr, const char* op)
    : groups_(std::move(groups)), lr_(lr), op_(op) {
  set_lr(lr);
  std::set<std::string> seen;
  for (const ParamGroup& g : groups_) {
    FG_CHECK(std::isfinite(g.weight_decay) && g.weight_decay >= 0,
             "[{}] weight_decay must be >= 0, got {}", op_, g.weight_decay);
    for (const auto& [name, t] : g.params) {
      FG_CHECK(!name.empty(), "[{}] a parameter has an empty name", op_);
      FG_CHECK(seen.insert(name).second, "[{}] parameter '{}' appears twice", op_, name);
      FG_CHECK(t.defined(), "[{}] parameter '{}' is undefined", op_, name);
      FG_CHECK(is_floating(t.dtype()), "[{}] parameter '{}' must be f32, f16 or bf16, got {}", op_,
               name, dtype_name(t.dtype()));
      FG_CHECK(t.is_contiguous(), "[{}] parameter '{}' must be contiguous", op_, name);
    }
  }
}

void Optimizer::zero_grad() const {
  for (const ParamGroup& g : groups_)
    for (const auto& [name, t] : g.params) autograd::clear_grad(t);
}

void Optimizer::set_lr(double lr) {
  FG_CHECK(std::isfinite(lr) && lr >= 0, "[{}] learning rate must be >= 0, got {}", op_, lr);
  lr_ = lr;
}

void Optimizer::for_each_gradient(const Update& update) {
  size_t index = 0;
  for (const ParamGroup& group : groups_) {
    for (const auto& [name, p] : group.params) {
      const size_t i = index++;
      const Tensor g = autograd::grad(p);
      if (!g.defined()) continue;
      FG_CHECK(g.shape() == p.shape() && g.device() == p.device(),
               "[{}] gradient of '{}' is {} on {}, the parameter {} on {}", op_, name,
               shape_str(g.shape()), g.device().str(), shape_str(p.shape()), p.device().str());
      update(i, group, name, p, g);
    }
  }
  ++steps_;
}

}  // namespace fitgrad::optim
