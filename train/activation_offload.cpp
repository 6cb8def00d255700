// Activation offload (see activation_offload.h, Note [Activation offload]).
#include "train/activation_offload.h"

#include "optim/offload.h"
#include "tensor/memory/scope.h"
#include "tensor/storage.h"

namespace fitgrad::train {

autograd::SavedTensorHooks activation_offload_hooks(Device device) {
  const Device host = optim::offload_host(device);
  const bool pinned = host.type == DeviceType::cpu;  // a real card copies from pinned memory
  auto pack = [device, host, pinned](const Tensor& t) {
    if (t.device() != device || t.storage()->category() != Category::activation) return t;
    CategoryScope category(Category::activation);
    Tensor h = Tensor::empty(t.shape(), t.dtype(), host, pinned);
    h.copy_(t);
    return h;
  };
  auto unpack = [device, host](const Tensor& h) {
    if (h.device() != host) return h;
    CategoryScope category(Category::activation);
    Tensor t = Tensor::empty(h.shape(), h.dtype(), device);
    t.copy_(h);
    return t;
  };
  return {pack, unpack};
}

}  // namespace fitgrad::train
