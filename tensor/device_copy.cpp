// The registry of device byte copies (see device_copy.h).
#include "tensor/device_copy.h"

#include <cstring>
#include <map>
#include <mutex>

#include "tensor/error.h"

namespace fitgrad {

namespace {

struct Registry {
  std::mutex mutex;
  std::map<DeviceType, DeviceMemcpy> copies;  // nodes are stable: find() hands out pointers
  std::map<DeviceType, DeviceSynchronize> synchronizes;
  std::map<DeviceType, DeviceErrorCheck> error_checks;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: copies may run during exit
  return *r;
}

}  // namespace

void register_device_memcpy(DeviceType type, DeviceMemcpy fn) {
  FG_ASSERT(type == DeviceType::cuda, "only device backends register a memcpy");
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.copies[type] = std::move(fn);
}

const DeviceMemcpy* find_device_memcpy(DeviceType type) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.copies.find(type);
  return it == r.copies.end() ? nullptr : &it->second;
}

void require_device_memcpy(Device device, const char* op) {
  FG_ASSERT(device.has_bytes(), "meta has no bytes to copy");
  FG_CHECK(device.type == DeviceType::cpu || find_device_memcpy(device.type) != nullptr,
           "[{}] {} is not available: fitgrad was built without CUDA", op, device.str());
}

void device_memcpy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
                   const char* op) {
  if (bytes == 0) return;
  if (dst_device.type == DeviceType::cpu && src_device.type == DeviceType::cpu) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const Device backend = dst_device.type == DeviceType::cpu ? src_device : dst_device;
  require_device_memcpy(backend, op);
  (*find_device_memcpy(backend.type))(dst, dst_device, src, src_device, bytes);
}

void register_device_synchronize(DeviceType type, DeviceSynchronize fn) {
  FG_ASSERT(type == DeviceType::cuda, "only device backends register a synchronize");
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.synchronizes[type] = fn;
}

void synchronize(Device device) {
  DeviceSynchronize fn = nullptr;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    auto it = r.synchronizes.find(device.type);
    if (it != r.synchronizes.end()) fn = it->second;
  }
  if (fn) fn(device.index);
}

void register_device_error_check(DeviceType type, DeviceErrorCheck fn) {
  FG_ASSERT(type == DeviceType::cuda, "only device backends register an error check");
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.error_checks[type] = fn;
}

void check_device_errors(Device device) {
  DeviceErrorCheck fn = nullptr;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    auto it = r.error_checks.find(device.type);
    if (it != r.error_checks.end()) fn = it->second;
  }
  if (fn) fn(device.index);
}

}  // namespace fitgrad
