// Byte copies between host memory (`cpu`, pageable or pinned) and CUDA device memory
// (`cuda:N`), in any direction, including between two CUDA devices. copy.cpp registers
// copy_bytes as the cuda DeviceMemcpy of tensor/device_copy.h at static initialisation,
// so tensor/ moves a Tensor's bytes without naming CUDA. Copies run in order on the
// compute stream (Note [Copies in stream order] in copy.cpp): when copy_bytes returns, the
// source may be reused, and the bytes are at `dst` for every later kernel and, for a copy
// to the host, for the host; only a copy to the host (and from pinned memory) waits.
#pragma once

#include <cstddef>

#include "tensor/device.h"

namespace fitgrad::cuda {

// Copies `bytes` bytes from `src`, which lives on `src_device`, to `dst`, which lives on
// `dst_device`. At least one side must be cuda:N and the other cpu or cuda:M; meta has no
// bytes. Pointers are raw addresses (a Tensor's data pointer plus its byte offset).
// Throws fitgrad::Error naming the devices for an unsupported pair and naming the CUDA
// call when the copy fails. bytes == 0 does nothing.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);

}  // namespace fitgrad::cuda
