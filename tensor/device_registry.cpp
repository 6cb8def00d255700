// The registry of backend device counts (see device_registry.h).
#include "tensor/device_registry.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "tensor/error.h"

namespace fitgrad {

namespace {

struct Registry {
  std::mutex mutex;
  std::map<DeviceType, DeviceCount> counts;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed, like the memcpy registry
  return *r;
}

}  // namespace

void register_device_count(DeviceType type, DeviceCount fn) {
  FG_ASSERT(type == DeviceType::cuda, "only device backends register a device count");
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.counts[type] = std::move(fn);
}

int usable_device_count(DeviceType type) noexcept {
  if (type == DeviceType::cpu || type == DeviceType::meta) return 1;
  try {
    DeviceCount count;
    {
      Registry& r = registry();
      std::lock_guard lock(r.mutex);
      auto it = r.counts.find(type);
      if (it == r.counts.end()) return 0;
      count = it->second;  // called outside the lock
    }
    return std::max(count(), 0);
  } catch (...) {
    return 0;  // a count that fails means no device can be used
  }
}

}  // namespace fitgrad
