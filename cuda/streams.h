// The CUDA streams of a device: stream 0 is the compute stream, stream 1 the copy stream
// (offload and prefetch), both created on first use with cudaStreamNonBlocking so that
// neither waits for the legacy default stream. The caching allocator names streams by
// these numbers (Note [Blocks other streams use] in tensor/memory/caching_allocator.h).
#pragma once

#include <cuda_runtime_api.h>

namespace fitgrad::cuda {

inline constexpr int kComputeStream = 0;
inline constexpr int kCopyStream = 1;
inline constexpr int kStreamsPerDevice = 2;

// The stream `id` (kComputeStream or kCopyStream) of cuda:`device`. Throws fitgrad::Error
// naming the stream for another id, and the CUDA call when creating it fails.
cudaStream_t stream_of(int device, int id);

}  // namespace fitgrad::cuda
