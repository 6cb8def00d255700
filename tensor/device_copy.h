// The hooks through which a device backend moves bytes between host memory and its
// devices, and waits for its queued work. tensor/ never includes a CUDA header (DESIGN.md), so cuda/ registers its
// byte copy here at startup and Tensor::to / copy_ call it. Without a registered hook a
// device is "not available". See Note [Device copies through the memcpy hook] in
// tensor.cpp for what tensor/ does around the hook (casting and gathering on the host).
#pragma once

#include <cstddef>
#include <functional>

#include "tensor/device.h"

namespace fitgrad {

// Copies `bytes` bytes from `src` on `src_device` to `dst` on `dst_device`. On return the
// source may be reused and the bytes are at `dst` for everything after the copy in the
// device's order (its later kernels; the host, for a copy to the host). A backend may leave
// a copy to its device in flight (Note [Copies in stream order] in cuda/copy.cpp).
// One side is a device of the registering backend; the other is cpu or a device of the
// same backend. Pointers are raw addresses (storage data plus the byte offset).
using DeviceMemcpy = std::function<void(void* dst, Device dst_device, const void* src,
                                        Device src_device, size_t bytes)>;

// Note [Pinned copies in flight]
// A copy from pinned host memory to a card returns before its DMA has read the block, so
// the pinned pool must not hand the block out again until the card is past the copy: the
// caller marks the source's block with record_stream(pinned_copy_stream(card)) (Note [Blocks
// other streams use] in tensor/memory/caching_allocator.h). The pinned pool's stream 1 + k
// stands for cuda:k's compute stream, where the copy is queued; the pinned source records
// its events there. A block that host code writes while it is still alive (the optimizer
// offload's masters) is written only after a copy to the host, which waits for the stream.
inline int pinned_copy_stream(Device device) { return 1 + device.index; }

// Registers (or replaces) the byte copy for devices of `type` (cuda; never cpu or meta).
void register_device_memcpy(DeviceType type, DeviceMemcpy fn);
// The registered copy for `type`, or nullptr.
const DeviceMemcpy* find_device_memcpy(DeviceType type);
// Throws fitgrad::Error "[op] cuda:0 is not available: fitgrad was built without CUDA"
// when no backend registered a byte copy for `device` (cpu always has one).
void require_device_memcpy(Device device, const char* op);
// Copies through the hook of the non-cpu side; both sides cpu is a plain memcpy.
void device_memcpy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
                   const char* op);

// Waits until every kernel and copy queued on cuda:`index` is done: benchmarks time work
// with it. Registered by the backend that owns the device type, as its memcpy is.
using DeviceSynchronize = void (*)(int index);
void register_device_synchronize(DeviceType type, DeviceSynchronize fn);
// Waits for `device`'s queued work; cpu and meta run synchronously, so for them (and for a
// device type no backend registered) it returns at once.
void synchronize(Device device);

// Note [Device error flags] (cuda/error_flags.h): a backend whose kernels record indices
// out of range on the device registers the check that reads them. check_device_errors
// throws fitgrad::Error naming the op for any recorded since the last check (a host read);
// cpu and meta kernels throw at once, so for them (and for a backend that registered none)
// it returns at once. A test may register a check for cpu, standing in for a card's records
// (tests/train/train_test.cpp); registering null removes one.
using DeviceErrorCheck = void (*)(int index);
void register_device_error_check(DeviceType type, DeviceErrorCheck fn);
void check_device_errors(Device device);

}  // namespace fitgrad
