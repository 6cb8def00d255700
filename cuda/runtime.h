// Shared helpers for the CUDA backend: turning CUDA runtime errors into fitgrad::Error,
// and a guard that makes one device current for a scope. This header includes the CUDA
// runtime API, so only files in cuda/ may include it (DESIGN.md: no file outside cuda/
// includes a CUDA header).
#pragma once

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <string>

#include "tensor/error.h"

namespace fitgrad::cuda {

// Throws fitgrad::Error "[cuda] <call> failed: <description> (<error name>)". Clears the
// thread's last-error state first, so a recoverable error does not leak into the next
// unrelated check.
[[noreturn]] void throw_cuda_error(cudaError_t err, const std::string& call);

// Number of visible CUDA devices. Where the runtime cannot count them (no driver, a driver
// older than the runtime, no device node) it throws fitgrad::Error with cudaGetDeviceCount's
// error, which usable_device_count turns into 0 and device_count_problem into its reason
// (tensor/device_registry.h).
int device_count();

// Throws fitgrad::Error naming `index` when cuda:index is not a visible device.
void check_device_index(int index);

// Note [Device guard]
// cudaSetDevice is per host thread, and other code (user code, the tests) may rely on the
// current device. Every call that must run on a given device makes it current for the
// scope of a DeviceGuard, which restores the previous device on exit.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// One library handle per device for the process's lifetime (cuBLASLt's, cuSOLVER's): the
// first call for `device` makes it with create(&handle), which throws on failure (and the
// next call tries again); later calls return it. Each call site's `create` is its own
// lambda type, so each kind of handle has its own table.
template <class Handle, class Create>
Handle per_device_handle(int device, Create create) {
  static std::mutex mutex;
  static std::map<int, Handle> handles;
  std::lock_guard lock(mutex);
  auto [it, fresh] = handles.try_emplace(device, Handle{});
  if (fresh) {
    try {
      create(&it->second);
    } catch (...) {
      handles.erase(it);
      throw;
    }
  }
  return it->second;
}

}  // namespace fitgrad::cuda

// FG_CUDA_CHECK(cudaFoo(args)): throws fitgrad::Error naming the call and its place
// ("cudaFoo(args) at cuda/x.cpp:12") on any error.
#define FG_CUDA_STRINGIFY_(x) #x
#define FG_CUDA_LINE_(x) FG_CUDA_STRINGIFY_(x)
#define FG_CUDA_CHECK(call)                                                                 \
  do {                                                                                      \
    const cudaError_t fg_cuda_err_ = (call);                                                \
    if (fg_cuda_err_ != cudaSuccess)                                                        \
      ::fitgrad::cuda::throw_cuda_error(fg_cuda_err_,                                       \
                                        #call " at " __FILE__ ":" FG_CUDA_LINE_(__LINE__)); \
  } while (0)
