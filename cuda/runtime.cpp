// CUDA error reporting, device counting and the device guard (see cuda/runtime.h).
#include "cuda/runtime.h"

#include <fmt/format.h>

namespace fitgrad::cuda {

void throw_cuda_error(cudaError_t err, const std::string& call) {
  (void)cudaGetLastError();  // reset the non-sticky error state of this thread
  throw Error(fmt::format("[cuda] {} failed: {} ({})", call, cudaGetErrorString(err),
                          cudaGetErrorName(err)));
}

int device_count() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) throw_cuda_error(err, "cudaGetDeviceCount");
  return n;
}

void check_device_index(int index) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    throw Error(fmt::format("[cuda] cuda:{} is not available: {} ({})", index,
                            cudaGetErrorString(err), cudaGetErrorName(err)));
  }
  FG_CHECK(index >= 0 && index < n, "[cuda] cuda:{} is not available: {} device(s) visible", index,
           n);
}

DeviceGuard::DeviceGuard(int index) {
  FG_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != index) {
    const cudaError_t err = cudaSetDevice(index);
    if (err != cudaSuccess) throw_cuda_error(err, fmt::format("cudaSetDevice({})", index));
  }
}

DeviceGuard::~DeviceGuard() {
  // A destructor must not throw: restoring the device is best effort.
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current == previous_) return;
  if (cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
}

}  // namespace fitgrad::cuda
