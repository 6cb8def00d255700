// The error records through which CUDA kernels report indices out of range (embedding ids,
// cross-entropy targets) without a host read on every call.
//
// Note [Device error flags]
// The CPU kernels throw at once for an id or a target outside its range: the values are in
// host memory. On a card the check used to copy the indices back before each launch, a
// stall per embedding and per loss. Instead each kernel that reads indices checks them
// where they are: an index out of range adds 1 to its op's record (DeviceErrorRecord in
// cuda/kernels/launch.h), leaves one example, and is skipped (a zero row; a row left out of
// the loss). The host reads the records at check_device_errors (tensor/device_copy.h): the
// trainer checks at each logging step and after an evaluation. A non-zero record throws an Error naming the op, the count,
// the range and an example, and the records restart at zero. The records are one
// cudaMalloc per device of kDeviceErrorOps * 16 bytes, made on first use and never freed:
// outside the caching allocator's ledger, like the CUDA context itself.
#pragma once

#include <cstdint>

#include "cuda/kernels/launch.h"

namespace fitgrad::cuda {

// The device-memory record of `op` on cuda:`device`, allocated and zeroed on first use;
// `bound` (the range's end: V, the classes) is remembered for the message.
DeviceErrorRecord* error_record(int device, DeviceErrorOp op, int64_t bound);

// Reads cuda:`device`'s records (one host read, after the queued work), zeroes them, and
// throws fitgrad::Error for the first op with a recorded index. Registered as the cuda
// error check of tensor/device_copy.h.
void check_error_records(int device);

}  // namespace fitgrad::cuda
