// Activation offload (see activation_offload.h, Notes [Activation offload] and [Offload
// overlaps with one block in flight]).
#include "train/activation_offload.h"

#include <unordered_map>
#include <vector>

#include "tensor/async_copy.h"
#include "tensor/memory/scope.h"
#include "tensor/storage.h"

namespace fitgrad::train {

Device activation_far_memory(Device device) {
  switch (device.type) {
    case DeviceType::cuda: return Device::cpu();
    case DeviceType::meta: return Device{DeviceType::meta, 1};
    case DeviceType::cpu: break;
  }
  return Device{DeviceType::cpu, 1};
}

CachingAllocator& far_memory_allocator(Device device) {
  return device.type == DeviceType::cuda ? pinned_allocator()
                                         : allocator_for(activation_far_memory(device));
}

struct ActivationOffload::State {
  // One saved tensor in far memory.
  struct Entry {
    Tensor far;                     // until it is back on the device
    MemoryContext context;          // of its save, for the device copy it comes back to
    std::unique_ptr<AsyncCopy> in;  // its copy back, once started
    bool back = false;
  };

  Device device, far;
  bool pinned = false;
  std::vector<Entry> entries;  // in save order
  std::unordered_map<const Storage*, size_t> entry_of;
  std::unique_ptr<AsyncCopy> out;  // the newest copy out
  int in_flight = 0;               // copies back started and not yet waited for

  Tensor pack(const Tensor& t) {
    if (t.device() != device || t.storage()->category() != Category::activation) return t;
    const MemoryContext context = current_memory_context();
    const CategoryScope category(Category::activation);
    Tensor src = t.contiguous();
    Tensor h = Tensor::empty(t.shape(), t.dtype(), far, pinned);
    end_forward();  // the previous tensor's copy had its block's forward to finish
    out = std::make_unique<AsyncCopy>(h, std::move(src));
    entry_of.emplace(h.storage().get(), entries.size());
    entries.push_back({h, context, nullptr, false});
    return h;
  }

  Tensor unpack(const Tensor& h) {
    if (h.device() != far) return h;
    end_forward();
    Tensor back;
    auto it = entry_of.find(h.storage().get());
    if (it == entry_of.end()) {
      back = AsyncCopy(device_tensor(h, current_memory_context()), h).wait();
    } else {
      Entry& e = entries[it->second];
      entry_of.erase(it);
      if (!e.in) start_in(e);
      back = e.in->wait();
      --in_flight;
      e.in.reset();
      e.far = Tensor();
      e.back = true;
    }
    prefetch();
    return back;
  }

  void end_forward() {
    if (out) out->wait();
    out.reset();
  }

 private:
  Tensor device_tensor(const Tensor& like, MemoryContext context) const {
    const MemoryContextScope scope({Category::activation, context.label});
    return Tensor::empty(like.shape(), like.dtype(), device);
  }

  void start_in(Entry& e) {
    e.in = std::make_unique<AsyncCopy>(device_tensor(e.far, e.context), e.far);
    ++in_flight;
  }

  // Starts bringing back the newest tensor still in far memory, unless one is on its way.
  void prefetch() {
    if (in_flight > 0) return;
    for (size_t j = entries.size(); j-- > 0;)
      if (!entries[j].back) {
        start_in(entries[j]);
        return;
      }
  }
};

ActivationOffload::ActivationOffload(Device device) : state_(std::make_shared<State>()) {
  state_->device = device;
  state_->far = activation_far_memory(device);
  state_->pinned = device.type == DeviceType::cuda;  // a card copies from pinned memory
}

ActivationOffload::~ActivationOffload() = default;

autograd::SavedTensorHooks ActivationOffload::hooks() const {
  return {[s = state_](const Tensor& t) { return s->pack(t); },
          [s = state_](const Tensor& h) { return s->unpack(h); }};
}

void ActivationOffload::end_forward() { state_->end_forward(); }

}  // namespace fitgrad::train
