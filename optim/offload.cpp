// Optimizer offload (see offload.h, Note [Optimizer offload]).
#include "optim/offload.h"

#include "autograd/variable.h"
#include "tensor/memory/scope.h"

namespace fitgrad::optim {

Device offload_host(Device device) {
  switch (device.type) {
    case DeviceType::cuda: return Device::cpu();
    case DeviceType::meta: return Device{DeviceType::meta, 1};
    case DeviceType::cpu: break;
  }
  throw Error(
      fmt::format("[offload] optimizer offload moves the optimizer to host memory, and on {} the "
                  "parameters are there already: use --device cuda (or meta to plan it)",
                  device.str()));
}

OptimizerOffload::OptimizerOffload(const Named& device_params, Device host)
    : device_(device_params) {
  FG_CHECK(!device_.empty(), "[offload] no trained parameters to offload");
  CategoryScope category(Category::optimizer_state);
  for (const auto& [name, p] : device_) {
    LabelScope label(name + ".offload_master");
    Tensor master = Tensor::empty(p.shape(), p.dtype(), host);
    master.copy_(p);
    autograd::set_name(master, name);
    host_.emplace_back(name, master);
  }
}

void OptimizerOffload::sync_from_device() {
  for (size_t i = 0; i < device_.size(); ++i) host_[i].second.copy_(device_[i].second);
}

void OptimizerOffload::pull_grads() {
  CategoryScope category(Category::gradient);
  for (size_t i = 0; i < device_.size(); ++i) {
    const Tensor g = autograd::grad(device_[i].second);
    if (!g.defined()) continue;
    LabelScope label(host_[i].first + ".grad");
    const Device host = host_[i].second.device();
    autograd::set_grad(host_[i].second, g.to(host));
    autograd::clear_grad(device_[i].second);
  }
}

void OptimizerOffload::push_params() {
  for (size_t i = 0; i < device_.size(); ++i) {
    device_[i].second.copy_(host_[i].second);
    autograd::clear_grad(host_[i].second);
  }
}

}  // namespace fitgrad::optim
