// APOLLO and APOLLO-Mini (see apollo.h).
#include "optim/apollo.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "optim/target_modules.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/error.h"
#include "tensor/memory/scope.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/optim_update.h"
#include "tensor/ops/random.h"
#include "tensor/random/philox.h"

namespace fitgrad::optim {
namespace {

constexpr uint32_t kProjectionTag = 0x41504F4C;  // "APOL" (Note [APOLLO projections])
constexpr const char* kSeedKey = "projection_seed";

// m >= n: R = G P^T (m, r), the channels are the rows; else R = P G (r, n).
bool right_side(const Tensor& p) { return p.shape()[0] >= p.shape()[1]; }

// The specs, once the options are checked (the shapes depend on the rank).
StateSpecFn apollo_specs(const ApolloOptions& o, const char* op) {
  check_apollo_options(o, op);
  return [o](const std::string& name, const Tensor& p) {
    if (!is_target_module(o.target_modules, name, p))
      return std::vector<StateSpec>{{.name = "exp_avg", .shape = p.shape()},
                                    {.name = "exp_avg_sq", .shape = p.shape()}};
    const Shape low = right_side(p) ? Shape{p.shape()[0], o.rank} : Shape{o.rank, p.shape()[1]};
    return std::vector<StateSpec>{{.name = "exp_avg", .shape = low},
                                  {.name = "exp_avg_sq", .shape = low},
                                  {.name = "scaled_grad_norm", .shape = {}}};
  };
}

Tensor i64_scalar(uint64_t v) { return Tensor::full({}, double(int64_t(v)), DType::i64); }

}  // namespace

void check_apollo_options(const ApolloOptions& o, const char* op) {
  FG_CHECK(o.beta1 >= 0 && o.beta1 < 1, "[{}] beta1 must be in [0, 1), got {}", op, o.beta1);
  FG_CHECK(o.beta2 >= 0 && o.beta2 < 1, "[{}] beta2 must be in [0, 1), got {}", op, o.beta2);
  FG_CHECK(o.eps >= 0, "[{}] eps must be >= 0, got {}", op, o.eps);
  FG_CHECK(o.rank >= 1 && o.rank <= (int64_t(1) << 20), "[{}] rank must be in [1, 1048576], got {}",
           op, o.rank);
  FG_CHECK(std::isfinite(o.scale) && o.scale > 0, "[{}] scale must be > 0, got {}", op, o.scale);
  FG_CHECK(o.update_proj_gap >= 1, "[{}] update_proj_gap must be >= 1, got {}", op,
           o.update_proj_gap);
  FG_CHECK(std::isfinite(o.norm_growth_limit) && o.norm_growth_limit >= 1,
           "[{}] norm_growth_limit must be >= 1, got {}", op, o.norm_growth_limit);
  FG_CHECK(!o.target_modules.empty(), "[{}] target_modules is empty", op);
  for (const std::string& t : o.target_modules)
    FG_CHECK(!t.empty(), "[{}] target_modules has an empty name", op);
}

ApolloOptions apollo_mini_options() {
  ApolloOptions o;
  o.rank = 1;
  o.scale = 128;
  o.scaling = ApolloScaling::tensor;
  return o;
}

uint64_t apollo_projection_key(uint64_t seed, uint64_t index, uint64_t refresh) {
  FG_ASSERT(index <= std::numeric_limits<uint32_t>::max(), "parameter index {} above 2^32", index);
  const PhiloxCounter b =
      philox4x32_10({uint32_t(refresh), uint32_t(refresh >> 32), uint32_t(index), kProjectionTag},
                    {uint32_t(seed), uint32_t(seed >> 32)});
  return uint64_t(b[0]) | (uint64_t(b[1]) << 32);
}

Apollo::Apollo(std::vector<ParamGroup> groups, const ApolloOptions& options, const char* name)
    : Optimizer(std::move(groups), options.lr, name, apollo_specs(options, name)),
      options_(options),
      name_(name) {
  for (size_t i = 0; i < num_params(); ++i)
    projected_.push_back(
        char(is_target_module(options.target_modules, states_.param_name(i), states_.param(i))));
  FG_CHECK(std::count(projected_.begin(), projected_.end(), 1) > 0,
           "[{}] no parameter is a 2-D weight of the target modules ({}): nothing to project", name,
           fmt::join(options.target_modules, ", "));
}

Tensor Apollo::projection(size_t index, int64_t refresh, DType dtype) const {
  FG_CHECK(index < num_params() && projected_[index], "[{}] parameter {} is not projected", name_,
           index);
  const Tensor& p = states_.param(index);
  const int64_t side = right_side(p) ? p.shape()[1] : p.shape()[0];
  Tensor q = Tensor::empty({options_.rank, side}, dtype, p.device());
  ops::normal_(q, RngState{apollo_projection_key(options_.seed, index, uint64_t(refresh)), 0},
               1.0 / std::sqrt(double(options_.rank)));
  return q;
}

void Apollo::update(size_t i, const ParamGroup& group, const std::string& name, const Tensor& p,
                    const Tensor& g) {
  // A backend without a kernel throws here, before any change.
  const bool projected = projected_[i];
  if (projected) {
    for (backend::OpId op :
         {backend::OpId::normal_, backend::OpId::matmul, backend::OpId::apollo_update})
      backend::require_kernel(op, p.device());
  } else {
    backend::require_kernel(backend::OpId::adamw_update, p.device());
  }
  ParamStates::State& s = states_.begin_update(i);
  const double t = double(s.step);
  const double step =
      lr_ * std::sqrt(1 - std::pow(options_.beta2, t)) / (1 - std::pow(options_.beta1, t));
  const double decay = 1 - lr_ * group.weight_decay;
  const Tensor grad = g.contiguous();
  if (!projected) {
    // W = (W - step m / (sqrt(v) + eps)) * decay, as the fused AdamW kernel computes
    // W * decay - step * decay * m / (sqrt(v) / 1 + eps).
    const backend::AdamWScalars k{
        float(decay),          float(options_.beta1),     float(1 - options_.beta1),
        float(options_.beta2), float(1 - options_.beta2), 1.0f,
        float(options_.eps),   float(-step * decay)};
    ops::adamw_update_(p, grad, s.buffers[0], s.buffers[1], k, rounding(p));
    return;
  }
  const bool right = right_side(p);
  Tensor low;  // R: (m, r) or (r, n), in grad's dtype
  {
    const MemoryContextScope scope(
        {Category::temporary, intern_label(name + ".apollo_projection")});
    const Tensor q = projection(i, (s.step - 1) / options_.update_proj_gap, grad.dtype());
    low = right ? ops::matmul(grad, q, false, true) : ops::matmul(q, grad);
  }
  backend::ApolloScalars k;
  k.beta1 = float(options_.beta1);
  k.one_minus_beta1 = float(1 - options_.beta1);
  k.beta2 = float(options_.beta2);
  k.one_minus_beta2 = float(1 - options_.beta2);
  k.eps = float(options_.eps);
  k.step = step * std::sqrt(options_.scale);
  k.growth = options_.norm_growth_limit;
  k.decay = float(decay);
  k.weight_decay = group.weight_decay > 0;
  k.right = right;
  k.tensor_wise = options_.scaling == ApolloScaling::tensor;
  k.first = s.step == 1;
  ops::apollo_update_(p, grad, low, s.buffers[0], s.buffers[1], s.buffers[2], k, rounding(p));
}

std::map<std::string, Tensor> Apollo::state_dict() const {
  std::map<std::string, Tensor> out = Optimizer::state_dict();
  out[kSeedKey] = i64_scalar(options_.seed);
  return out;
}

void Apollo::load_state_dict(const std::map<std::string, Tensor>& state) {
  const auto it = state.find(kSeedKey);
  FG_CHECK(it != state.end(), "[{}] load_state_dict: missing '{}'", name_, kSeedKey);
  const Tensor& t = it->second;
  FG_CHECK(t.defined() && t.dtype() == DType::i64 && t.numel() == 1 && t.device().has_bytes(),
           "[{}] '{}' must be an i64 scalar on cpu", name_, kSeedKey);
  const uint64_t seed = uint64_t(t.to(Device::cpu()).data<int64_t>()[0]);
  std::map<std::string, Tensor> rest = state;
  rest.erase(kSeedKey);
  Optimizer::load_state_dict(rest);
  options_.seed = seed;
}

}  // namespace fitgrad::optim
