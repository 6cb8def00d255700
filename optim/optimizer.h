// The optimizer interface (DESIGN.md, optim/): parameter groups with their own weight
// decay, Hugging Face Trainer's decay grouping, and the Optimizer base class that AdamW and
// SGD implement. An optimizer reads each parameter's gradient (autograd::grad) and updates
// the parameter in place; its state lives in the memory ledger under
// Category::optimizer_state, labelled "<param>.<state>" (Note [Optimizer state is lazy] in
// param_state.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace fitgrad::optim {

// Parameters (full dotted name, tensor) that share a weight decay.
struct ParamGroup {
  std::vector<std::pair<std::string, Tensor>> params;
  double weight_decay = 0.0;
};

// Hugging Face Trainer's grouping: weight decay on every parameter except biases and norm
// weights, i.e. every parameter of one dimension gets 0. Returns two groups in this order,
// either possibly empty: {decayed (weight_decay), not decayed (0)}; each keeps the
// parameters' order and names.
std::vector<ParamGroup> decay_groups(const std::vector<std::pair<std::string, Tensor>>& named,
                                     double weight_decay);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Applies the gradients (autograd::grad(p)) to the parameters. A parameter whose gradient
  // is undefined is skipped, as torch does. On meta the state is allocated and nothing is
  // computed (a dry run).
  virtual void step() = 0;
  // Drops every parameter's gradient (zero_grad with set_to_none).
  void zero_grad() const;

  double lr() const { return lr_; }
  void set_lr(double lr);
  // Optimizer steps taken (step() calls, on any device).
  int64_t steps() const { return steps_; }
  const std::vector<ParamGroup>& groups() const { return groups_; }

  // Every state tensor as "<param name>.<state>" (e.g. "transformer.wte.weight.exp_avg"),
  // plus what an exact resume needs (the step counts, as i64 scalars); state tensors are
  // aliases, not copies. load_state_dict copies into the existing state or creates it,
  // after checking every name and shape; an error names each culprit and loads nothing.
  virtual std::map<std::string, Tensor> state_dict() const = 0;
  virtual void load_state_dict(const std::map<std::string, Tensor>& state) = 0;
  virtual std::string name() const = 0;  // "adamw", "sgd"

 protected:
  // Checks the groups: names unique and non-empty, tensors defined, floating, contiguous.
  // `op` starts error messages ("[adamw] ...").
  Optimizer(std::vector<ParamGroup> groups, double lr, const char* op);

  // One step's walk over the parameters, shared by every optimizer: calls
  // update(index, group, name, param, grad) for each parameter that has a gradient, in group
  // order (index counts every parameter, skipped ones too, as the state slots do), after
  // checking that the gradient's shape and device are the parameter's; then counts the step.
  using Update = std::function<void(size_t index, const ParamGroup& group, const std::string& name,
                                    const Tensor& param, const Tensor& grad)>;
  void for_each_gradient(const Update& update);

  std::vector<ParamGroup> groups_;
  double lr_;
  int64_t steps_ = 0;

 private:
  const char* op_;
};

}  // namespace fitgrad::optim
