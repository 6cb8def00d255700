// Raw memory sources under the CachingAllocator: where segments come from. The policy
// (rounding, pools, splitting, caching) is the allocator's alone, so every source sees
// the same calls given the same requests. Sources here: host (aligned) and virtual (for
// `meta`); cuda/ adds cudaMalloc and pinned host memory through register_raw_source.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "tensor/device.h"

namespace fitgrad {

class RawSource {
 public:
  virtual ~RawSource() = default;
  // A block of `bytes` bytes aligned to at least 512 B, or nullptr when the source
  // itself is out of memory (the allocator then frees its cache and retries).
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* ptr, size_t bytes) = 0;
  // False for the virtual source: its addresses have no memory behind them.
  virtual bool has_bytes() const { return true; }
};

std::unique_ptr<RawSource> make_host_source();
std::unique_ptr<RawSource> make_virtual_source();

// Backends register factories for their devices. `kind` is "cuda" (called with the device
// index) or "pinned" (index 0).
using RawSourceFactory = std::function<std::unique_ptr<RawSource>(int index)>;
void register_raw_source(const std::string& kind, RawSourceFactory factory);
// nullptr when no backend registered `kind`.
const RawSourceFactory* find_raw_source(const std::string& kind);

}  // namespace fitgrad
