// The CUDA copy stream behind tensor/async_copy.h (Note [Copies retired in program order]):
// a copy between cuda:N and (pinned) host memory queued on cuda:N's copy stream after the
// compute stream's work so far, and the compute stream's wait for it. Registered at static
// initialisation, as the byte copy in copy.cpp is.
#include <fmt/format.h>

#include "cuda/runtime.h"
#include "cuda/streams.h"
#include "tensor/async_copy.h"
#include "tensor/memory/bytes.h"

namespace fitgrad::cuda {

namespace {

cudaEvent_t new_event(int device) {
  cudaEvent_t event = nullptr;
  if (const cudaError_t err = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
      err != cudaSuccess)
    throw_cuda_error(err, fmt::format("cudaEventCreateWithFlags on cuda:{}", device));
  return event;
}

void check(cudaError_t err, const char* call, Device dst, Device src, size_t bytes) {
  if (err != cudaSuccess)
    throw_cuda_error(err, fmt::format("{} on the copy stream ({} from {} to {})", call,
                                      format_bytes(int64_t(bytes)), src.str(), dst.str()));
}

uint64_t enqueue(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  const bool to_device = dst_device.type == DeviceType::cuda;
  FG_CHECK(to_device != (src_device.type == DeviceType::cuda),
           "[async_copy] the copy stream moves bytes between a card and the host, not from {} to "
           "{}",
           src_device.str(), dst_device.str());
  const int device = to_device ? dst_device.index : src_device.index;
  DeviceGuard guard(device);
  const cudaStream_t compute = stream_of(device, kComputeStream);
  const cudaStream_t copy = stream_of(device, kCopyStream);
  // The copy reads what the compute stream's kernels so far wrote, and writes a block those
  // kernels may have used before it was freed.
  cudaEvent_t ready = new_event(device);
  check(cudaEventRecord(ready, compute), "cudaEventRecord", dst_device, src_device, bytes);
  check(cudaStreamWaitEvent(copy, ready, 0), "cudaStreamWaitEvent", dst_device, src_device, bytes);
  check(cudaEventDestroy(ready), "cudaEventDestroy", dst_device, src_device, bytes);
  check(cudaMemcpyAsync(dst, src, bytes,
                        to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, copy),
        "cudaMemcpyAsync", dst_device, src_device, bytes);
  cudaEvent_t done = new_event(device);
  check(cudaEventRecord(done, copy), "cudaEventRecord", dst_device, src_device, bytes);
  return reinterpret_cast<uint64_t>(done);
}

void compute_wait(int device, uint64_t event) {
  DeviceGuard guard(device);
  cudaEvent_t done = reinterpret_cast<cudaEvent_t>(event);
  const cudaError_t err = cudaStreamWaitEvent(stream_of(device, kComputeStream), done, 0);
  (void)cudaEventDestroy(done);
  if (err != cudaSuccess)
    throw_cuda_error(err, fmt::format("cudaStreamWaitEvent for a copy on cuda:{}", device));
}

// See Note [Registration at static initialisation] in raw_sources.cpp.
struct Registrar {
  Registrar() { register_copy_stream(DeviceType::cuda, {enqueue, compute_wait}); }
};
const Registrar registrar;

}  // namespace

}  // namespace fitgrad::cuda
