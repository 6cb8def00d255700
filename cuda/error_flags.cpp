// Device error records (see error_flags.h).
#include "cuda/error_flags.h"

#include <array>
#include <map>
#include <mutex>

#include "cuda/runtime.h"
#include "cuda/streams.h"
#include "tensor/device_copy.h"
#include "tensor/error.h"
#include "tensor/host_reads.h"

namespace fitgrad::cuda {
namespace {

constexpr int kOps = int(DeviceErrorOp::count);

struct Records {
  DeviceErrorRecord* device = nullptr;  // kOps records
  std::array<int64_t, kOps> bounds{};
};

struct Registry {
  std::mutex mutex;
  std::map<int, Records> by_device;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: kernels may run during exit
  return *r;
}

const char* op_name(DeviceErrorOp op) {
  switch (op) {
    case DeviceErrorOp::embedding: return "embedding";
    case DeviceErrorOp::embedding_backward: return "embedding_backward";
    case DeviceErrorOp::embedding_4bit: return "embedding_4bit";
    case DeviceErrorOp::cross_entropy: return "cross_entropy";
    case DeviceErrorOp::cross_entropy_backward: return "cross_entropy_backward";
    case DeviceErrorOp::count: break;
  }
  return "?";
}

bool is_loss(DeviceErrorOp op) {
  return op == DeviceErrorOp::cross_entropy || op == DeviceErrorOp::cross_entropy_backward;
}

// See Note [Registration at static initialisation] in raw_sources.cpp.
struct Registrar {
  Registrar() { register_device_error_check(DeviceType::cuda, check_error_records); }
};
const Registrar registrar;

}  // namespace

DeviceErrorRecord* error_record(int device, DeviceErrorOp op, int64_t bound) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Records& rec = r.by_device[device];
  if (rec.device == nullptr) {
    DeviceGuard guard(device);
    void* p = nullptr;
    FG_CUDA_CHECK(cudaMalloc(&p, sizeof(DeviceErrorRecord) * kOps));
    // On the compute stream, where the kernels that record run: the legacy default stream's
    // plain cudaMemset is not ordered with a non-blocking stream, so a bad id recorded by the
    // very first kernel could be wiped after it and never reported (issue 46).
    FG_CUDA_CHECK(
        cudaMemsetAsync(p, 0, sizeof(DeviceErrorRecord) * kOps, stream_of(device, kComputeStream)));
    rec.device = static_cast<DeviceErrorRecord*>(p);
  }
  rec.bounds[size_t(op)] = bound;
  return rec.device + int(op);
}

void check_error_records(int device) {
  std::array<DeviceErrorRecord, kOps> host{};
  std::array<int64_t, kOps> bounds{};
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    const auto it = r.by_device.find(device);
    if (it == r.by_device.end()) return;  // no kernel has checked an index here yet
    bounds = it->second.bounds;
    DeviceGuard guard(device);
    const cudaStream_t stream = stream_of(device, kComputeStream);
    count_host_read();  // Note [Host reads]
    FG_CUDA_CHECK(cudaMemcpyAsync(host.data(), it->second.device, sizeof(host),
                                  cudaMemcpyDeviceToHost, stream));
    FG_CUDA_CHECK(cudaStreamSynchronize(stream));
    bool any = false;
    for (const DeviceErrorRecord& e : host) any = any || e.bad > 0;
    if (!any) return;
    FG_CUDA_CHECK(cudaMemsetAsync(it->second.device, 0, sizeof(host), stream));
  }
  for (int i = 0; i < kOps; ++i) {
    if (host[size_t(i)].bad == 0) continue;
    const auto op = DeviceErrorOp(i);
    FG_CHECK(false,
             "[{}] {} {} out of range [0, {}) on cuda:{} since the last check (one was {}); "
             "their rows were left out",
             op_name(op), host[size_t(i)].bad, is_loss(op) ? "targets" : "ids", bounds[size_t(i)],
             device, host[size_t(i)].example);
  }
}

}  // namespace fitgrad::cuda
