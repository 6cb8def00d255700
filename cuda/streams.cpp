// The compute and copy streams of each device (see cuda/streams.h).
#include "cuda/streams.h"

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <utility>

#include "cuda/runtime.h"

namespace fitgrad::cuda {

cudaStream_t stream_of(int device, int id) {
  FG_CHECK(id >= 0 && id < kStreamsPerDevice,
           "[cuda] stream {} of cuda:{}: there are {} streams (0 compute, 1 copy)", id, device,
           kStreamsPerDevice);
  static std::mutex mutex;
  static std::map<std::pair<int, int>, cudaStream_t> streams;
  std::lock_guard lock(mutex);
  auto [it, fresh] = streams.try_emplace({device, id}, nullptr);
  if (fresh) {
    DeviceGuard guard(device);
    const cudaError_t err = cudaStreamCreateWithFlags(&it->second, cudaStreamNonBlocking);
    if (err != cudaSuccess) {
      streams.erase(it);
      throw_cuda_error(err,
                       fmt::format("cudaStreamCreateWithFlags (stream {} of cuda:{})", id, device));
    }
  }
  return it->second;
}

}  // namespace fitgrad::cuda
