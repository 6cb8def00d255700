// Host<->device and device<->device byte copies (see cuda/copy.h), registered as the
// cuda byte copy of tensor/device_copy.h at static initialisation.
#include "cuda/copy.h"

#include <fmt/format.h>

#include "cuda/runtime.h"
#include "cuda/streams.h"
#include "tensor/device_copy.h"
#include "tensor/memory/bytes.h"

namespace fitgrad::cuda {

namespace {

std::string describe(const char* call, Device dst, Device src, size_t bytes) {
  return fmt::format("{}({} from {} to {})", call, format_bytes(int64_t(bytes)), src.str(),
                     dst.str());
}

void check(cudaError_t err, const char* call, Device dst, Device src, size_t bytes) {
  if (err != cudaSuccess) throw_cuda_error(err, describe(call, dst, src, bytes));
}

// Both streams of the device, compute then copy.
void synchronize_device(int index) {
  DeviceGuard guard(index);
  for (int stream = 0; stream < kStreamsPerDevice; ++stream)
    FG_CUDA_CHECK(cudaStreamSynchronize(stream_of(index, stream)));
}

// See Note [Registration at static initialisation] in raw_sources.cpp.
struct Registrar {
  Registrar() {
    register_device_memcpy(DeviceType::cuda, copy_bytes);
    register_device_synchronize(DeviceType::cuda, synchronize_device);
  }
};
const Registrar registrar;

}  // namespace

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  const bool dst_cuda = dst_device.type == DeviceType::cuda;
  const bool src_cuda = src_device.type == DeviceType::cuda;
  FG_CHECK((dst_cuda || dst_device.type == DeviceType::cpu) &&
               (src_cuda || src_device.type == DeviceType::cpu) && (dst_cuda || src_cuda),
           "[copy] the CUDA backend cannot copy from {} to {}", src_device.str(), dst_device.str());
  if (bytes == 0) return;
  FG_CHECK(dst != nullptr && src != nullptr, "[copy] null pointer in a copy of {} from {} to {}",
           format_bytes(int64_t(bytes)), src_device.str(), dst_device.str());

  if (dst_cuda && src_cuda && dst_device.index != src_device.index) {
    // The source's kernels finish first; the destination's stream then orders the copy
    // before its later kernels. Works with or without peer access.
    {
      DeviceGuard guard(src_device.index);
      check(cudaStreamSynchronize(stream_of(src_device.index, kComputeStream)),
            "cudaStreamSynchronize", dst_device, src_device, bytes);
    }
    DeviceGuard guard(dst_device.index);
    const cudaStream_t stream = stream_of(dst_device.index, kComputeStream);
    check(cudaMemcpyPeerAsync(dst, dst_device.index, src, src_device.index, bytes, stream),
          "cudaMemcpyPeerAsync", dst_device, src_device, bytes);
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize", dst_device, src_device, bytes);
    return;
  }
  // Note [Copies in stream order]
  // The kernels run on the device's non-blocking compute stream, which a plain cudaMemcpy
  // (on the legacy default stream) does not wait for. A copy goes on that stream, after the
  // kernels that wrote its source, and waits only where the host needs it to (Note [Host
  // reads] in tensor/host_reads.h):
  //   device to host      waits: the host reads the bytes next (a host read);
  //   device to device    no wait: every later kernel is ordered after it on the stream;
  //   pageable to device  no wait: cudaMemcpyAsync returns once it has staged the source
  //                       (CUDA's API synchronization rules), so the caller may free it;
  //   pinned to device    no wait: the DMA reads the block after the call returns, so the
  //                       caller marks it (Note [Pinned copies in flight] in
  //                       tensor/device_copy.h) and the pinned pool holds it back until the
  //                       card is past the copy.
  const int device = dst_cuda ? dst_device.index : src_device.index;
  DeviceGuard guard(device);
  const cudaStream_t stream = stream_of(device, kComputeStream);
  const cudaMemcpyKind kind = dst_cuda && src_cuda ? cudaMemcpyDeviceToDevice
                              : dst_cuda           ? cudaMemcpyHostToDevice
                                                   : cudaMemcpyDeviceToHost;
  check(cudaMemcpyAsync(dst, src, bytes, kind, stream), "cudaMemcpyAsync", dst_device, src_device,
        bytes);
  if (kind == cudaMemcpyDeviceToHost)
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize", dst_device, src_device, bytes);
}

}  // namespace fitgrad::cuda
