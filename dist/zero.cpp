// ZeRO's ownership, step, norm and state gathering (zero.h, Note [ZeRO by whole parameters]).
#include "dist/zero.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>
#include <vector>

#include "autograd/grad_mode.h"
#include "optim/state_spec.h"
#include "tensor/error.h"
#include "tensor/memory/scope.h"
#include "tensor/ops/op_util.h"
#include "tensor/ops/optim_update.h"

namespace fitgrad::dist {

ZeroSharding::ZeroSharding(ProcessGroup& group, optim::Optimizer& optimizer, int stage)
    : group_(group), optimizer_(optimizer), stage_(stage) {
  FG_CHECK(stage == 1 || stage == 2, "[zero] --zero_stage must be 1 or 2, got {}", stage);
  const size_t n = optimizer.num_params();
  std::vector<int64_t> weight(n);  // Note [ZeRO by whole parameters]: the bytes it brings
  for (size_t i = 0; i < n; ++i) {
    weight[i] = optim::state_bytes(optimizer.state_specs(i));
    if (weight[i] == 0) {
      const Tensor& p = optimizer.param(i);
      weight[i] = p.numel() * int64_t(element_size(p.dtype()));
    }
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return weight[a] > weight[b]; });
  std::vector<int64_t> load(size_t(group.size()), 0);
  owner_.assign(n, 0);
  for (size_t i : order) {
    const int rank = int(std::min_element(load.begin(), load.end()) - load.begin());
    owner_[i] = rank;
    load[size_t(rank)] += weight[i];
  }
}

bool ZeroSharding::owns(const std::string& name) const { return owns(optimizer_.index_of(name)); }

void ZeroSharding::reduce_norm(const Tensor& sum_sq) const {
  if (stage_ < 2) return;
  // The double's bits travel as one i64 per rank, and the sums are added here in rank order,
  // so every rank gets the same total. Both buffers are on sum_sq's device, meta included, so
  // a plan makes the run's allocations (Note [Planning one rank] in dist/meta_group.h); on
  // the cpu the values are read and written in place, with no host copies in the ledger.
  const Device device = sum_sq.device();
  Tensor mine, all;  // (1), (world) i64
  {
    const MemoryContextScope scope({Category::collective, intern_label("zero.norm")});
    mine = Tensor::empty({1}, DType::i64, device);
    all = Tensor::empty({group_.size()}, DType::i64, device);
  }
  const bool cpu = device == Device::cpu();
  if (device.has_bytes()) {
    const double local = cpu ? ops::doubles_in(sum_sq)[0] : ops::read_double(sum_sq);
    int64_t bits = 0;
    std::memcpy(&bits, &local, sizeof(bits));
    if (cpu)
      mine.data<int64_t>()[0] = bits;
    else
      mine.copy_(Tensor::from_vector(std::vector<int64_t>{bits}, {1}, DType::i64));
  }
  group_.all_gather(mine, all);
  if (!device.has_bytes()) return;
  const Tensor host = all.to(Device::cpu());
  double total = 0;
  for (int k = 0; k < group_.size(); ++k) {
    double v = 0;
    std::memcpy(&v, host.data<int64_t>() + k, sizeof(v));
    total += v;
  }
  if (cpu) {
    ops::doubles_in(sum_sq)[0] = total;
    return;
  }
  Tensor out = ops::zero_doubles(1, Device::cpu());
  ops::doubles_in(out)[0] = total;
  autograd::NoGradGuard no_grad;
  Tensor(sum_sq).copy_(out);  // the same storage
}

void ZeroSharding::step() {
  optimizer_.begin_step();
  for (size_t i = 0; i < owner_.size(); ++i) {
    if (owns(i))
      optimizer_.step_param(i);
    else
      optimizer_.skip_param(i);
  }
  optimizer_.end_step();
  autograd::NoGradGuard no_grad;
  for (size_t i = 0; i < owner_.size(); ++i) group_.broadcast(optimizer_.param(i), owner_[i]);
}

std::map<std::string, Tensor> ZeroSharding::consolidated_state_dict() const {
  const std::map<std::string, Tensor> mine = optimizer_.state_dict();
  const bool root = group_.rank() == 0;
  std::map<std::string, Tensor> out;
  std::set<std::string> per_param;
  autograd::NoGradGuard no_grad;
  for (size_t i = 0; i < owner_.size(); ++i) {
    const std::string& name = optimizer_.param_name(i);
    const Device device = optimizer_.param(i).device();
    per_param.insert(name + ".step");
    for (const optim::StateSpec& spec : optimizer_.state_specs(i))
      per_param.insert(name + "." + spec.name);
    // The owner says whether the parameter has state (its step count, 0 for none) ...
    Tensor count = Tensor::zeros({1}, DType::i64, Device::cpu());
    if (owns(i))
      if (const auto it = mine.find(name + ".step"); it != mine.end())
        count.data<int64_t>()[0] = int64_t(it->second.to(Device::cpu()).item());
    {
      const MemoryContextScope scope({Category::collective, intern_label("zero.gather")});
      Tensor on_device = count.to(device);
      group_.broadcast(on_device, owner_[i]);
      count = on_device.to(Device::cpu());
    }
    const int64_t steps = count.data<int64_t>()[0];
    if (steps == 0) continue;
    if (root) out[name + ".step"] = Tensor::full({}, double(steps), DType::i64);
    // ... then its tensors, one at a time, each to rank 0's host.
    for (const optim::StateSpec& spec : optimizer_.state_specs(i)) {
      const std::string key = name + "." + spec.name;
      Tensor t;
      if (owns(i)) {
        const auto it = mine.find(key);
        FG_CHECK(it != mine.end(), "[zero] parameter '{}' has a step count but no '{}'", name,
                 spec.name);
        t = it->second;
      } else {
        const MemoryContextScope scope({Category::collective, intern_label("zero.gather")});
        t = Tensor::empty(spec.shape, spec.dtype, optim::state_device(spec, device));
      }
      group_.broadcast(t, owner_[i]);
      if (root) out[key] = t.device() == Device::cpu() ? t : t.to(Device::cpu());
    }
  }
  if (!root) return {};
  for (const auto& [key, t] : mine)
    if (!per_param.count(key)) out[key] = t;  // the optimizer's own entries, equal on every rank
  return out;
}

std::map<std::string, Tensor> ZeroSharding::local(
    const std::map<std::string, Tensor>& whole) const {
  std::set<std::string> foreign;
  for (size_t i = 0; i < owner_.size(); ++i) {
    if (owns(i)) continue;
    const std::string& name = optimizer_.param_name(i);
    foreign.insert(name + ".step");
    for (const optim::StateSpec& spec : optimizer_.state_specs(i))
      foreign.insert(name + "." + spec.name);
  }
  std::map<std::string, Tensor> out;
  for (const auto& [key, t] : whole)
    if (!foreign.count(key)) out[key] = t;
  return out;
}

}  // namespace fitgrad::dist
