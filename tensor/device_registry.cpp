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

namespace {

// The registered count of `type` (called outside the lock), or null when none is registered.
DeviceCount registered_count(DeviceType type) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.counts.find(type);
  return it == r.counts.end() ? DeviceCount() : it->second;
}

}  // namespace

int usable_device_count(DeviceType type) noexcept {
  if (type == DeviceType::cpu || type == DeviceType::meta) return 1;
  try {
    const DeviceCount count = registered_count(type);
    return count ? std::max(count(), 0) : 0;
  } catch (...) {
    return 0;  // a count that fails means no device can be used
  }
}

std::string device_count_problem(DeviceType type) noexcept {
  if (type == DeviceType::cpu || type == DeviceType::meta) return "";
  try {
    const DeviceCount count = registered_count(type);
    if (!count) return "this build has no backend for this device type (built without CUDA)";
    const int n = count();
    return n > 0 ? "" : "the backend counts no device";
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "the device count failed";
  }
}

}  // namespace fitgrad
