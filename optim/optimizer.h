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

#include "optim/param_state.h"
#include "optim/state_spec.h"
#include "tensor/backend/kernel_args.h"
#include "tensor/ops/quantize_int8.h"
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
  // computed (a dry run). The same as begin_step(), step_param(i) for every i, end_step().
  void step();

  // Note [Per-parameter steps]
  // One optimizer step can also be taken a parameter at a time, so that it runs inside a
  // gradient hook as each gradient becomes final (optimizer-in-backward) and the gradient
  // can be freed at once: begin_step() opens the step, step_param(i) applies parameter i's
  // gradient (index as in num_params(): group order, every parameter counted), at most
  // once per step, and end_step() closes it and counts it. Each parameter's update is the
  // one step() makes, so the two ways give bitwise-equal parameters and state.
  void begin_step();
  void step_param(size_t index);
  void end_step();
  // Note [Sharded steps]
  // Under ZeRO (dist/zero.h) a rank updates only the parameters it owns and marks each
  // other one skipped within the open step: skip_param(i) takes no update and allocates no
  // state, but advances the rounding stream (Note [Stochastic rounding of updates]) by the
  // draws parameter i's update would take, assuming its gradient is defined (a data-parallel
  // step defines every trained gradient). So every rank's stream stays where one process's
  // would be, and the owner of parameter j rounds j's update with the draws one process
  // would use.
  void skip_param(size_t index);
  size_t num_params() const { return num_params_; }
  // The index of the parameter named `name`; throws naming it when there is none.
  size_t index_of(const std::string& name) const;
  // Parameter `index` (as num_params() counts) and its full name.
  const Tensor& param(size_t index) const;
  const std::string& param_name(size_t index) const;
  // Drops every parameter's gradient (zero_grad with set_to_none).
  void zero_grad() const;

  double lr() const { return lr_; }
  void set_lr(double lr);
  // Optimizer steps taken (step() calls, on any device).
  int64_t steps() const { return steps_; }
  const std::vector<ParamGroup>& groups() const { return groups_; }

  // The state tensors parameter `index` gets (Note [Declared optimizer state]).
  const std::vector<StateSpec>& state_specs(size_t index) const { return states_.specs(index); }

  // Every state tensor as "<param name>.<spec name>" (e.g.
  // "transformer.wte.weight.exp_avg"), plus what an exact resume needs (the step counts, as
  // i64 scalars); state tensors are aliases, not copies. load_state_dict copies into the
  // existing state or creates it, after checking every name, shape and dtype against the
  // specs; an error names each culprit and loads nothing. An optimizer with more state
  // than its specs (a loss scaler's) extends both.
  // Note [Stochastic rounding of updates]
  // With stochastic rounding on, every bf16 parameter's update is written back rounded at
  // random (Note [Stochastic rounding] in tensor/cpu/param_store.h), from the optimizer's
  // own Philox stream: each update of a bf16 parameter takes the next numel draws. The
  // stream's seed and offset are in state_dict ("stochastic_rounding.seed" / ".offset", i64
  // scalars), so a resumed run draws what the uninterrupted one would have.
  void set_stochastic_rounding(uint64_t seed);
  bool stochastic_rounding() const { return bf16_rounding_; }

  // Note [Int8 updates]
  // A parameter given here by name is an int8 weight (nn/int8_linear.h): its tensor in the
  // groups is the u8 codes, its gradient floating. Its update (Q-GaLore's weight update,
  // Note [Int8 weights] in tensor/quant/int8.h) dequantizes the weight into an f32
  // temporary, applies this optimizer's own update to it in f32 (any optimizer: the same
  // kernel and state as a dense f32 parameter of that shape), and re-quantizes it into the
  // codes, scales and zeros in place, scales and zeros recomputed and the codes rounded
  // stochastically with the next numel draws of the optimizer's Philox stream (the stream
  // of Note [Stochastic rounding of updates], turned on here with `seed` if it was off, and
  // saved in state_dict). On meta the temporary is allocated and freed as on a device, so a
  // dry run plans it. A u8 parameter with no int8 state is an error at its step.
  void set_int8_weights(std::map<std::string, ops::Int8> weights, uint64_t seed);

  virtual std::map<std::string, Tensor> state_dict() const;
  virtual void load_state_dict(const std::map<std::string, Tensor>& state);
  virtual std::string name() const = 0;  // "adamw", "sgd"

 protected:
  // Checks the groups: names unique and non-empty, tensors defined, floating, contiguous.
  // `op` starts error messages ("[adamw] ..."); `specs` declares each parameter's state.
  Optimizer(std::vector<ParamGroup> groups, double lr, const char* op, const StateSpecFn& specs);

  // One parameter's update within an open step, given its defined gradient, whose shape and
  // device step_param has checked against the parameter's; index counts every parameter,
  // skipped ones too, as the state slots do.
  virtual void update(size_t index, const ParamGroup& group, const std::string& name,
                      const Tensor& param, const Tensor& grad) = 0;

  // The rounding of param's update in this step: reserves its draws when rounding is on and
  // param is bf16 (on meta too, so a dry run leaves the stream where the real run would).
  backend::StochasticRounding rounding(const Tensor& param);

  std::vector<ParamGroup> groups_;
  double lr_;
  int64_t steps_ = 0;
  ParamStates states_;  // by index, as num_params() counts

 private:
  const char* op_;
  size_t num_params_ = 0;
  std::vector<std::pair<size_t, size_t>> where_;  // index -> (group, position in group)
  std::vector<char> stepped_;                     // this step: parameter i already applied
  bool in_step_ = false;
  bool bf16_rounding_ = false;             // bf16 parameters round stochastically
  bool stream_on_ = false;                 // the rounding stream is in use (bf16 or int8 updates)
  std::map<std::string, ops::Int8> int8_;  // by parameter name (Note [Int8 updates])
  uint64_t rounding_seed_ = 0, rounding_offset_ = 0;
};

}  // namespace fitgrad::optim
