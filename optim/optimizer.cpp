// The Optimizer base and Hugging Face's decay grouping (see optimizer.h).
#include "optim/optimizer.h"

#include <cmath>
#include <set>

#include "autograd/variable.h"
#include "tensor/error.h"
#include "tensor/memory/scope.h"
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

namespace {

std::vector<std::pair<std::string, Tensor>> flatten(const std::vector<ParamGroup>& groups) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const ParamGroup& g : groups) out.insert(out.end(), g.params.begin(), g.params.end());
  return out;
}

// The groups, once checked: names unique and non-empty, tensors defined, floating and
// contiguous, weight decays >= 0.
std::vector<ParamGroup> checked_groups(std::vector<ParamGroup> groups, const char* op) {
  std::set<std::string> seen;
  for (const ParamGroup& g : groups) {
    FG_CHECK(std::isfinite(g.weight_decay) && g.weight_decay >= 0,
             "[{}] weight_decay must be >= 0, got {}", op, g.weight_decay);
    for (const auto& [name, t] : g.params) {
      FG_CHECK(!name.empty(), "[{}] a parameter has an empty name", op);
      FG_CHECK(seen.insert(name).second, "[{}] parameter '{}' appears twice", op, name);
      FG_CHECK(t.defined(), "[{}] parameter '{}' is undefined", op, name);
      FG_CHECK(is_floating(t.dtype()) || t.dtype() == DType::u8,
               "[{}] parameter '{}' must be f32, f16 or bf16 (or an int8 weight's u8 codes), "
               "got {}",
               op, name, dtype_name(t.dtype()));
      FG_CHECK(t.is_contiguous(), "[{}] parameter '{}' must be contiguous", op, name);
    }
  }
  return groups;
}

}  // namespace

Optimizer::Optimizer(std::vector<ParamGroup> groups, double lr, const char* op,
                     const StateSpecFn& specs)
    : groups_(checked_groups(std::move(groups), op)),
      lr_(lr),
      states_(op, flatten(groups_), specs),  // after the checks: specs see valid tensors
      op_(op) {
  set_lr(lr);
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t k = 0; k < groups_[g].params.size(); ++k) where_.emplace_back(g, k);
  num_params_ = where_.size();
}

namespace {

constexpr const char* kRoundingSeed = "stochastic_rounding.seed";
constexpr const char* kRoundingOffset = "stochastic_rounding.offset";

Tensor i64_scalar(uint64_t v) { return Tensor::full({}, double(int64_t(v)), DType::i64); }

uint64_t read_u64(const char* op, const std::string& key, const Tensor& t) {
  FG_CHECK(t.defined() && t.dtype() == DType::i64 && t.numel() == 1 && t.device().has_bytes(),
           "[{}] '{}' must be an i64 scalar on cpu", op, key);
  return uint64_t(t.to(Device::cpu()).data<int64_t>()[0]);
}

}  // namespace

std::map<std::string, Tensor> Optimizer::state_dict() const {
  std::map<std::string, Tensor> out = states_.state_dict(steps_);
  if (stream_on_) {
    out[kRoundingSeed] = i64_scalar(rounding_seed_);
    out[kRoundingOffset] = i64_scalar(rounding_offset_);
  }
  return out;
}

void Optimizer::load_state_dict(const std::map<std::string, Tensor>& state) {
  std::map<std::string, Tensor> rest = state;
  const auto seed = rest.find(kRoundingSeed), offset = rest.find(kRoundingOffset);
  FG_CHECK((seed == rest.end()) == (offset == rest.end()),
           "[{}] the state has one of '{}' and '{}' without the other", op_, kRoundingSeed,
           kRoundingOffset);
  uint64_t new_seed = rounding_seed_, new_offset = 0;
  if (seed != rest.end()) {
    new_seed = read_u64(op_, kRoundingSeed, seed->second);
    new_offset = read_u64(op_, kRoundingOffset, offset->second);
    rest.erase(kRoundingSeed);
    rest.erase(kRoundingOffset);
  }
  steps_ = states_.load_state_dict(rest);
  rounding_seed_ = new_seed;
  rounding_offset_ = new_offset;
}

void Optimizer::set_stochastic_rounding(uint64_t seed) {
  bf16_rounding_ = stream_on_ = true;
  rounding_seed_ = seed;
  rounding_offset_ = 0;
}

void Optimizer::set_int8_weights(std::map<std::string, ops::Int8> weights, uint64_t seed) {
  for (const auto& [name, q] : weights) {
    const auto [g, k] = where_[index_of(name)];
    FG_CHECK(groups_[g].params[k].second.same(q.codes),
             "[{}] the int8 state of '{}' is not its parameter's codes", op_, name);
  }
  int8_ = std::move(weights);
  if (!stream_on_) {
    stream_on_ = true;
    rounding_seed_ = seed;
    rounding_offset_ = 0;
  }
}

backend::StochasticRounding Optimizer::rounding(const Tensor& param) {
  if (!bf16_rounding_ || param.dtype() != DType::bf16) return {};
  const backend::StochasticRounding sr{true, rounding_seed_, rounding_offset_};
  rounding_offset_ += uint64_t(param.numel());
  return sr;
}

void Optimizer::zero_grad() const {
  for (const ParamGroup& g : groups_)
    for (const auto& [name, t] : g.params) autograd::clear_grad(t);
}

void Optimizer::set_lr(double lr) {
  FG_CHECK(std::isfinite(lr) && lr >= 0, "[{}] learning rate must be >= 0, got {}", op_, lr);
  lr_ = lr;
}

void Optimizer::step() {
  begin_step();
  try {
    for (size_t i = 0; i < num_params_; ++i) step_param(i);
  } catch (...) {
    in_step_ = false;  // the step did not happen; the next one may be tried
    throw;
  }
  end_step();
}

void Optimizer::begin_step() {
  FG_CHECK(!in_step_, "[{}] begin_step: the previous step was not ended", op_);
  in_step_ = true;
  stepped_.assign(num_params_, 0);
}

void Optimizer::step_param(size_t index) {
  FG_CHECK(in_step_, "[{}] step_param({}) outside begin_step/end_step", op_, index);
  FG_CHECK(index < num_params_, "[{}] step_param: index {} is out of range for {} parameters", op_,
           index, num_params_);
  const auto [g_index, k] = where_[index];
  const ParamGroup& group = groups_[g_index];
  const auto& [name, p] = group.params[k];
  FG_CHECK(!stepped_[index], "[{}] step_param: '{}' was already stepped in this step", op_, name);
  stepped_[index] = 1;
  const Tensor g = autograd::grad(p);
  if (!g.defined()) return;
  FG_CHECK(g.shape() == p.shape() && g.device() == p.device(),
           "[{}] gradient of '{}' is {} on {}, the parameter {} on {}", op_, name,
           shape_str(g.shape()), g.device().str(), shape_str(p.shape()), p.device().str());
  // What the update allocates besides its state (which has its own context) is the
  // parameter's: its label, the caller's category.
  const LabelScope label(name);
  if (p.dtype() != DType::u8) {
    update(index, group, name, p, g);
    return;
  }
  const auto q = int8_.find(name);
  FG_CHECK(q != int8_.end(),
           "[{}] parameter '{}' is u8 but has no int8 state (Optimizer::set_int8_weights)", op_,
           name);
  Tensor w;  // (p's shape) f32: the weight dequantized for its update (Note [Int8 updates])
  {
    const MemoryContextScope scope({Category::temporary, intern_label(name)});
    w = ops::dequantize_int8(q->second, DType::f32);
  }
  update(index, group, name, w, g);
  const backend::StochasticRounding sr{true, rounding_seed_, rounding_offset_};
  rounding_offset_ += uint64_t(p.numel());
  ops::requantize_int8_(q->second, w, sr);
}

void Optimizer::skip_param(size_t index) {
  FG_CHECK(in_step_, "[{}] skip_param({}) outside begin_step/end_step", op_, index);
  FG_CHECK(index < num_params_, "[{}] skip_param: index {} is out of range for {} parameters", op_,
           index, num_params_);
  const auto [g_index, k] = where_[index];
  const auto& [name, p] = groups_[g_index].params[k];
  FG_CHECK(!stepped_[index], "[{}] skip_param: '{}' was already stepped in this step", op_, name);
  stepped_[index] = 1;
  // Note [Sharded steps]: the draws of rounding(p), or of an int8 weight's requantization.
  const bool rounded = bf16_rounding_ && p.dtype() == DType::bf16;
  if (rounded || (p.dtype() == DType::u8 && int8_.count(name)))
    rounding_offset_ += uint64_t(p.numel());
}

void Optimizer::end_step() {
  FG_CHECK(in_step_, "[{}] end_step without begin_step", op_);
  in_step_ = false;
  ++steps_;
}

const Tensor& Optimizer::param(size_t index) const {
  FG_CHECK(index < num_params_, "[{}] param: index {} is out of range for {} parameters", op_,
           index, num_params_);
  return groups_[where_[index].first].params[where_[index].second].second;
}

const std::string& Optimizer::param_name(size_t index) const {
  FG_CHECK(index < num_params_, "[{}] param_name: index {} is out of range for {} parameters", op_,
           index, num_params_);
  return groups_[where_[index].first].params[where_[index].second].first;
}

size_t Optimizer::index_of(const std::string& name) const {
  for (size_t i = 0; i < num_params_; ++i)
    if (groups_[where_[i].first].params[where_[i].second].first == name) return i;
  throw Error(fmt::format("[{}] no parameter named '{}'", op_, name));
}

}  // namespace fitgrad::optim
