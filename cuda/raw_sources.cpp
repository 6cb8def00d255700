// cudaMalloc and cudaHostAlloc raw sources, and their registration with the allocator's
// registry of backend sources (see cuda/raw_sources.h), together with the device count
// (tensor/device_registry.h). The device source also reserves and maps virtual ranges
// through the driver's virtual memory management API, for expandable segments.
#include "cuda/raw_sources.h"

#include <cuda.h>
#include <fmt/format.h>

#include <cstdint>

#include "cuda/runtime.h"
#include "cuda/streams.h"
#include "tensor/device_registry.h"
#include "tensor/memory/bytes.h"
#include "tensor/memory/caching_allocator.h"

namespace fitgrad::cuda {

namespace {

// The allocator asks only for whole segments (multiples of 2 MiB), and RawSource promises
// 512 B alignment; cudaMalloc documents 256 B, so the promise is checked, not assumed.
constexpr uintptr_t kRequiredAlign = 512;

// The events of Note [Blocks other streams use]: a timing-free event recorded on `stream`
// of cuda:`device`, as an opaque handle; queried, waited for and destroyed by handle.
cudaEvent_t as_event(uint64_t event) { return reinterpret_cast<cudaEvent_t>(event); }

uint64_t record_stream_event(int device, int stream) {
  DeviceGuard guard(device);
  cudaEvent_t event = nullptr;
  if (const cudaError_t err = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
      err != cudaSuccess)
    throw_cuda_error(err, fmt::format("cudaEventCreateWithFlags on cuda:{}", device));
  const cudaError_t err = cudaEventRecord(event, stream_of(device, stream));
  if (err != cudaSuccess) {
    (void)cudaEventDestroy(event);
    throw_cuda_error(err, fmt::format("cudaEventRecord on stream {} of cuda:{}", stream, device));
  }
  return reinterpret_cast<uint64_t>(event);
}

bool stream_event_done(uint64_t event) {
  const cudaError_t err = cudaEventQuery(as_event(event));
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  if (err != cudaSuccess) throw_cuda_error(err, "cudaEventQuery");
  return true;
}

void wait_stream_event(uint64_t event) {
  if (const cudaError_t err = cudaEventSynchronize(as_event(event)); err != cudaSuccess)
    throw_cuda_error(err, "cudaEventSynchronize");
}

void release_stream_event(uint64_t event) {
  const cudaError_t err = cudaEventDestroy(as_event(event));
  if (err != cudaSuccess && err != cudaErrorCudartUnloading)
    throw_cuda_error(err, "cudaEventDestroy");
}

[[noreturn]] void throw_cu_error(CUresult result, const std::string& what) {
  const char* name = nullptr;
  if (cuGetErrorName(result, &name) != CUDA_SUCCESS) name = "an unknown driver error";
  throw Error(fmt::format("[cuda] {} failed: {}", what, name));
}

// Note [Expandable device memory]
// An expandable segment (Note [Expandable segments] in tensor/memory/caching_allocator.h)
// is an address range from cuMemAddressReserve. Each granule mapped into it is its own
// physical allocation (cuMemCreate of kExpandableGranule bytes, mapped with cuMemMap and
// made readable and writable by the card with cuMemSetAccess), because cuMemUnmap takes
// back only whole mappings and the allocator unmaps the tail granule by granule. The
// handle is released as soon as it is mapped: the mapping keeps the memory until unmapped.
// CUDA_ERROR_OUT_OF_MEMORY is the recoverable failure, as for cudaMalloc.
CUmemAllocationProp device_memory_prop(int index) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = index;
  return prop;
}

void check_granularity(int index) {
  const CUmemAllocationProp prop = device_memory_prop(index);
  size_t granularity = 0;
  if (const CUresult r =
          cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
      r != CUDA_SUCCESS)
    throw_cu_error(r, fmt::format("cuMemGetAllocationGranularity on cuda:{}", index));
  FG_CHECK(granularity > 0 && kExpandableGranule % granularity == 0,
           "[cuda] cuda:{} maps memory in granules of {} bytes, which do not divide the "
           "expandable segments' {} bytes; use --allocator native",
           index, granularity, kExpandableGranule);
}

void unmap_granules(int index, uintptr_t addr, size_t bytes) {
  for (size_t at = 0; at < bytes; at += kExpandableGranule)
    if (const CUresult r = cuMemUnmap(CUdeviceptr(addr + at), kExpandableGranule);
        r != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED)
      throw_cu_error(r, fmt::format("cuMemUnmap of {} at {:#x} on cuda:{}",
                                    format_bytes(int64_t(kExpandableGranule)), addr + at, index));
}

// Maps [addr, addr + bytes) granule by granule; false (with nothing left mapped) when the
// card is out of memory.
bool map_granules(int index, uintptr_t addr, size_t bytes) {
  const CUmemAllocationProp prop = device_memory_prop(index);
  for (size_t at = 0; at < bytes; at += kExpandableGranule) {
    CUmemGenericAllocationHandle handle = 0;
    CUresult r = cuMemCreate(&handle, kExpandableGranule, &prop, 0);
    if (r == CUDA_SUCCESS) {
      r = cuMemMap(CUdeviceptr(addr + at), kExpandableGranule, 0, handle, 0);
      const CUresult released = cuMemRelease(handle);
      if (r == CUDA_SUCCESS && released != CUDA_SUCCESS)
        throw_cu_error(released, fmt::format("cuMemRelease on cuda:{}", index));
    }
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      unmap_granules(index, addr, at);
      return false;
    }
    if (r != CUDA_SUCCESS)
      throw_cu_error(r, fmt::format("cuMemCreate/cuMemMap of {} at {:#x} on cuda:{}",
                                    format_bytes(int64_t(kExpandableGranule)), addr + at, index));
  }
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (const CUresult r = cuMemSetAccess(CUdeviceptr(addr), bytes, &access, 1); r != CUDA_SUCCESS)
    throw_cu_error(r, fmt::format("cuMemSetAccess of {} at {:#x} on cuda:{}",
                                  format_bytes(int64_t(bytes)), addr, index));
  return true;
}

// Note [Out of memory is not an error here]
// cudaErrorMemoryAllocation is the one failure the allocator can recover from (by freeing
// its cached segments and retrying), so the sources report it as nullptr after clearing
// the thread's last-error state. Every other failure is a real error and throws.
class DeviceSource final : public RawSource {
 public:
  explicit DeviceSource(int index) : index_(index) { check_device_index(index); }

  void* allocate(size_t bytes) override {
    DeviceGuard guard(index_);
    void* ptr = nullptr;
    const cudaError_t err = cudaMalloc(&ptr, bytes);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    if (err != cudaSuccess) {
      throw_cuda_error(
          err, fmt::format("cudaMalloc({}) on cuda:{}", format_bytes(int64_t(bytes)), index_));
    }
    FG_ASSERT(reinterpret_cast<uintptr_t>(ptr) % kRequiredAlign == 0,
              "cudaMalloc returned {} for {} bytes", ptr, bytes);
    return ptr;
  }

  void release(void* ptr, size_t bytes) override {
    DeviceGuard guard(index_);
    const cudaError_t err = cudaFree(ptr);
    // At process exit the runtime may be torn down before the allocator gives memory back;
    // the driver reclaims it anyway.
    if (err == cudaErrorCudartUnloading) return;
    if (err != cudaSuccess) {
      throw_cuda_error(err, fmt::format("cudaFree({} of {}) on cuda:{}", ptr,
                                        format_bytes(int64_t(bytes)), index_));
    }
  }

  // Note [Blocks other streams use]: a timing-free event on the stream, as its handle.
  uint64_t record_event(int stream) override { return record_stream_event(index_, stream); }
  bool event_done(uint64_t event) override { return stream_event_done(event); }
  void wait_event(uint64_t event) override { wait_stream_event(event); }
  void release_event(uint64_t event) override { release_stream_event(event); }

  // Note [Expandable device memory].
  void* reserve(size_t bytes) override {
    DeviceGuard guard(index_);
    // The driver's virtual-memory calls need a current context, which the runtime makes only
    // at its first real call: in a fresh process whose first allocation is an expandable
    // segment there is none yet (and the guard sets nothing for a device already named
    // current, as cuda:0 is before any call). cudaFree(nullptr) makes the primary context
    // current; afterwards it costs nothing.
    FG_CUDA_CHECK(cudaFree(nullptr));
    check_granularity(index_);
    CUdeviceptr ptr = 0;
    const CUresult r = cuMemAddressReserve(&ptr, bytes, kExpandableGranule, 0, 0);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return nullptr;
    if (r != CUDA_SUCCESS)
      throw_cu_error(r, fmt::format("cuMemAddressReserve({}) on cuda:{}",
                                    format_bytes(int64_t(bytes)), index_));
    return reinterpret_cast<void*>(ptr);
  }
  bool map(void* ptr, size_t bytes) override {
    DeviceGuard guard(index_);
    return map_granules(index_, reinterpret_cast<uintptr_t>(ptr), bytes);
  }
  void unmap(void* ptr, size_t bytes) override {
    DeviceGuard guard(index_);
    // The card may still read the range: the allocator unmaps only free blocks, which
    // another stream no longer uses (Note [Blocks other streams use]), but work queued on
    // the block's own stream may still be running.
    // At process exit the runtime may be gone; the driver reclaims the memory then.
    const cudaError_t err = cudaDeviceSynchronize();
    if (err == cudaErrorCudartUnloading) return;
    if (err != cudaSuccess)
      throw_cuda_error(err, fmt::format("cudaDeviceSynchronize on cuda:{}", index_));
    unmap_granules(index_, reinterpret_cast<uintptr_t>(ptr), bytes);
  }
  void release_reservation(void* ptr, size_t bytes) override {
    DeviceGuard guard(index_);
    const CUresult r = cuMemAddressFree(CUdeviceptr(reinterpret_cast<uintptr_t>(ptr)), bytes);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED)
      throw_cu_error(
          r, fmt::format("cuMemAddressFree({}) on cuda:{}", format_bytes(int64_t(bytes)), index_));
  }

 private:
  int index_;
};

class PinnedSource final : public RawSource {
 public:
  void* allocate(size_t bytes) override {
    void* ptr = nullptr;
    const cudaError_t err = cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    if (err != cudaSuccess) {
      throw_cuda_error(err, fmt::format("cudaHostAlloc({}, cudaHostAllocPortable)",
                                        format_bytes(int64_t(bytes))));
    }
    FG_ASSERT(reinterpret_cast<uintptr_t>(ptr) % kRequiredAlign == 0,
              "cudaHostAlloc returned {} for {} bytes", ptr, bytes);
    return ptr;
  }

  // Note [Pinned copies in flight] (tensor/device_copy.h): stream 1 + k of the pinned pool
  // is cuda:k's compute stream, where the copies from a pinned block are queued.
  uint64_t record_event(int stream) override {
    FG_ASSERT(stream >= 1, "the pinned pool's stream {} names no card", stream);
    return record_stream_event(stream - 1, kComputeStream);
  }
  bool event_done(uint64_t event) override { return stream_event_done(event); }
  void wait_event(uint64_t event) override { wait_stream_event(event); }
  void release_event(uint64_t event) override { release_stream_event(event); }

  void release(void* ptr, size_t bytes) override {
    const cudaError_t err = cudaFreeHost(ptr);
    if (err == cudaErrorCudartUnloading) return;
    if (err != cudaSuccess) {
      throw_cuda_error(err,
                       fmt::format("cudaFreeHost({} of {})", ptr, format_bytes(int64_t(bytes))));
    }
  }
};

// Note [Registration at static initialisation]
// fitgrad_cuda is an OBJECT library, so this file's objects are always linked and this
// registrar always runs. It makes no CUDA call: a build with CUDA on a machine without a
// GPU starts normally and fails only when a cuda:N tensor or pinned memory is asked for.
// Code that must know beforehand (the GPU tests) asks usable_device_count, which calls
// device_count: 0 without a device or a usable driver (device_count_problem says which).
struct Registrar {
  Registrar() {
    register_device_count(DeviceType::cuda, device_count);
    register_raw_source("cuda", [](int index) { return make_device_source(index); });
    register_raw_source("pinned", [](int) { return make_pinned_source(); });
  }
};
const Registrar registrar;

}  // namespace

std::unique_ptr<RawSource> make_device_source(int index) {
  return std::make_unique<DeviceSource>(index);
}

std::unique_ptr<RawSource> make_pinned_source() { return std::make_unique<PinnedSource>(); }

}  // namespace fitgrad::cuda
