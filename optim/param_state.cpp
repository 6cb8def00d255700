// Per-parameter optimizer state and its state_dict (see param_state.h).
#include "optim/param_state.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>
#include <utility>

#include "tensor/error.h"
#include "tensor/memory/scope.h"

namespace fitgrad::optim {
namespace {

constexpr int kStepSlot = -1;  // the "<param>.step" entry; buffers are slots 0, 1, ...

// Reads an i64 scalar entry, or explains what is wrong with it.
bool read_count(const std::string& key, const Tensor& t, int64_t min,
                std::vector<std::string>& problems, int64_t& out) {
  if (!t.defined() || t.dtype() != DType::i64 || t.numel() != 1 || !t.device().has_bytes()) {
    problems.push_back(fmt::format("'{}' must be an i64 scalar on cpu", key));
    return false;
  }
  out = int64_t(t.to(Device::cpu()).item());
  if (out < min) {
    problems.push_back(fmt::format("'{}' is {}, expected >= {}", key, out, min));
    return false;
  }
  return true;
}

// Checks one state entry against its spec (Note [Declared optimizer state]).
void check_entry(const std::string& key, const Tensor& t, const StateSpec& spec,
                 std::vector<std::string>& problems) {
  if (!t.defined()) {
    problems.push_back(fmt::format("'{}' is undefined", key));
    return;
  }
  const bool dtype_ok = is_floating(spec.dtype) ? is_floating(t.dtype()) : t.dtype() == spec.dtype;
  if (!dtype_ok)
    problems.push_back(fmt::format(
        "'{}' is {}, expected {}", key, dtype_name(t.dtype()),
        is_floating(spec.dtype) ? "a floating dtype" : std::string(dtype_name(spec.dtype))));
  if (t.shape() != spec.shape)
    problems.push_back(fmt::format("'{}' has shape {}, expected {}", key, shape_str(t.shape()),
                                   shape_str(spec.shape)));
}

}  // namespace

ParamStates::ParamStates(const char* op, std::vector<std::pair<std::string, Tensor>> params,
                         const StateSpecFn& specs)
    : op_(op), params_(std::move(params)) {
  for (const auto& [name, p] : params_) {
    specs_.push_back(specs(name, p));
    std::set<std::string> seen;
    for (const StateSpec& s : specs_.back())
      FG_ASSERT(!s.name.empty() && s.name != "step" && seen.insert(s.name).second,
                "[{}] parameter '{}' declares state '{}' twice, empty or reserved", op_, name,
                s.name);
  }
  states_.resize(params_.size());
}

void ParamStates::allocate(size_t i, bool initialise) {
  const Tensor& p = params_[i].second;
  State& s = states_[i];
  s.buffers.clear();
  for (const StateSpec& spec : specs_[i]) {
    MemoryContextScope scope(
        {Category::optimizer_state, intern_label(params_[i].first + "." + spec.name)});
    const Device device = state_device(spec, p.device());
    s.buffers.push_back(initialise && spec.init
                            ? Tensor::full(spec.shape, *spec.init, spec.dtype, device)
                            : Tensor::empty(spec.shape, spec.dtype, device));
  }
}

ParamStates::State& ParamStates::begin_update(size_t i) {
  State& s = states_[i];
  if (s.step == 0) allocate(i, /*initialise=*/true);
  ++s.step;
  return s;
}

std::map<std::string, Tensor> ParamStates::state_dict(int64_t steps) const {
  std::map<std::string, Tensor> out;
  out["step"] = Tensor::full({}, double(steps), DType::i64);
  for (size_t i = 0; i < states_.size(); ++i) {
    const State& s = states_[i];
    if (s.step == 0) continue;
    const std::string& name = params_[i].first;
    out[name + ".step"] = Tensor::full({}, double(s.step), DType::i64);
    for (size_t k = 0; k < specs_[i].size(); ++k)
      out[name + "." + specs_[i][k].name] = s.buffers[k];
  }
  return out;
}

int64_t ParamStates::load_state_dict(const std::map<std::string, Tensor>& state) {
  // Every name an entry may have: (parameter index, slot).
  std::map<std::string, std::pair<size_t, int>> expected;
  for (size_t i = 0; i < params_.size(); ++i) {
    expected[params_[i].first + ".step"] = {i, kStepSlot};
    for (size_t k = 0; k < specs_[i].size(); ++k)
      expected[params_[i].first + "." + specs_[i][k].name] = {i, int(k)};
  }
  std::vector<std::string> problems;
  int64_t steps = 0;
  auto global = state.find("step");
  if (global == state.end())
    problems.push_back("missing 'step'");
  else
    read_count("step", global->second, 0, problems, steps);

  // found[i][slot + 1]: the entry of parameter i's step (slot -1) and buffers.
  std::vector<std::vector<const Tensor*>> found(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) found[i].assign(specs_[i].size() + 1, nullptr);
  std::vector<int64_t> counts(params_.size(), 0);
  for (const auto& [key, t] : state) {
    if (key == "step") continue;
    auto it = expected.find(key);
    if (it == expected.end()) {
      problems.push_back(fmt::format("unexpected '{}'", key));
      continue;
    }
    const auto [i, slot] = it->second;
    found[i][size_t(slot + 1)] = &t;
    if (slot == kStepSlot) {
      read_count(key, t, 1, problems, counts[i]);
    } else {
      check_entry(key, t, specs_[i][size_t(slot)], problems);
    }
  }
  // A parameter with any entry needs all of them.
  for (size_t i = 0; i < params_.size(); ++i) {
    bool any = false;
    for (const Tensor* t : found[i]) any = any || t;
    if (!any) continue;
    if (!found[i][0]) problems.push_back(fmt::format("missing '{}.step'", params_[i].first));
    for (size_t k = 0; k < specs_[i].size(); ++k)
      if (!found[i][k + 1])
        problems.push_back(fmt::format("missing '{}.{}'", params_[i].first, specs_[i][k].name));
  }
  FG_CHECK(problems.empty(), "[{}] load_state_dict: {}", op_, fmt::join(problems, "; "));

  for (size_t i = 0; i < params_.size(); ++i) {
    State& s = states_[i];
    if (!found[i][0]) {
      s = State{};
      continue;
    }
    if (s.step == 0) allocate(i, /*initialise=*/false);
    for (size_t k = 0; k < specs_[i].size(); ++k) s.buffers[k].copy_(*found[i][k + 1]);
    s.step = counts[i];
  }
  return steps;
}

}  // namespace fitgrad::optim
