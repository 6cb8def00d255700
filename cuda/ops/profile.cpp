// The profile of a real card (tensor/backend/profile.h), registered for cuda at static
// initialisation, so the front-ends size workspaces for the card they run on: its SM count
// and its cuBLASLt workspace, 32 MiB on Hopper (sm_90) and later and 4 MiB before, as
// memplan's card table states them (apps/memplan/targets.cpp). Cached per device.
#include "tensor/backend/profile.h"

#include <map>
#include <mutex>

#include "cuda/runtime.h"

namespace fitgrad::cuda {
namespace {

backend::TargetProfile card_profile(int index) {
  static std::mutex mutex;
  static std::map<int, backend::TargetProfile> cache;
  std::lock_guard lock(mutex);
  auto it = cache.find(index);
  if (it != cache.end()) return it->second;
  check_device_index(index);
  int sms = 0, major = 0;
  FG_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, index));
  FG_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index));
  const int64_t workspace = major >= 9 ? int64_t(32) << 20 : int64_t(4) << 20;
  return cache.emplace(index, backend::cuda_profile(sms, workspace)).first->second;
}

// See Note [Registration at static initialisation] in cuda/raw_sources.cpp.
struct Registrar {
  Registrar() { backend::register_device_profile(DeviceType::cuda, card_profile); }
};
const Registrar registrar;

}  // namespace
}  // namespace fitgrad::cuda
