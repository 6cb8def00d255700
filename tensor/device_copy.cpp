// The registry of device byte copies (see device_copy.h).
#include "tensor/device_copy.h"

#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "tensor/error.h"

namespace fitgrad {

namespace {

struct Registry {
  std::mutex mutex;
  std::map<DeviceType, DeviceMemcpy> copies;  // nodes are stable: find() hands out pointers
  std::map<std::pair<int, DeviceType>, void (*)(int)> index_hooks;  // (IndexHook, type)
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

namespace {

// synchronize and check_device_errors: a per-device hook of each kind, taking the index.
enum class IndexHook { synchronize, check_errors };

void register_index_hook(IndexHook kind, DeviceType type, void (*fn)(int), const char* what) {
  FG_ASSERT(
      type == DeviceType::cuda || (kind == IndexHook::check_errors && type == DeviceType::cpu),
      "only device backends register {} (and tests an error check for cpu)", what);
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.index_hooks[{int(kind), type}] = fn;
}

void run_index_hook(IndexHook kind, Device device) {
  void (*fn)(int) = nullptr;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    auto it = r.index_hooks.find({int(kind), device.type});
    if (it != r.index_hooks.end()) fn = it->second;
  }
  if (fn) fn(device.index);
}

}  // namespace

void register_device_synchronize(DeviceType type, DeviceSynchronize fn) {
  register_index_hook(IndexHook::synchronize, type, fn, "a synchronize");
}

void synchronize(Device device) { run_index_hook(IndexHook::synchronize, device); }

void register_device_error_check(DeviceType type, DeviceErrorCheck fn) {
  register_index_hook(IndexHook::check_errors, type, fn, "an error check");
}

void check_device_errors(Device device) { run_index_hook(IndexHook::check_errors, device); }

}  // namespace fitgrad
