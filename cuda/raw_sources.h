// The CUDA raw sources under the CachingAllocator (tensor/memory/raw_source.h): device
// memory from cudaMalloc for `cuda:N`, and page-locked host memory from cudaHostAlloc for
// fast, asynchronous host<->device copies. raw_sources.cpp registers both at static
// initialisation as "cuda" and "pinned", so code above tensor/ never names them; these
// factories are here for tests that want a source without an allocator on top.
#pragma once

#include <memory>

#include "tensor/memory/raw_source.h"

namespace fitgrad::cuda {

// Device memory of cuda:index. Throws fitgrad::Error when that device is not visible.
// allocate() returns nullptr when the device is out of memory (the allocator then frees
// its cache and retries) and throws fitgrad::Error naming the call on any other error.
std::unique_ptr<RawSource> make_device_source(int index);

// Page-locked host memory, usable from every device (cudaHostAllocPortable).
std::unique_ptr<RawSource> make_pinned_source();

}  // namespace fitgrad::cuda
