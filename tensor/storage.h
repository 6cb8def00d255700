// Storage: a reference-counted block of device memory from a CachingAllocator. Tensors
// and their views share one Storage through std::shared_ptr; the block goes back to its
// allocator when the last of them is gone. A meta storage has an address but no bytes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "tensor/device.h"
#include "tensor/memory/caching_allocator.h"

namespace fitgrad {

class Storage {
 public:
  // Allocates through allocator_for(device), or pinned_allocator() when `pinned` (which
  // requires a cpu device), tagged with the thread's memory context.
  static std::shared_ptr<Storage> allocate(size_t nbytes, Device device, bool pinned = false);
  // Wraps host memory that the allocator did not make, such as a memory-mapped checkpoint
  // (zero-copy loading): `release` runs when the last tensor using it is gone. Such bytes
  // are not in the ledger; the loader that maps them reports them itself. On `device` meta
  // (data null), the stand-in for such a mapping in a dry run: no bytes, no ledger entry.
  static std::shared_ptr<Storage> wrap(void* data, size_t nbytes, std::function<void()> release,
                                       Device device = Device::cpu());
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  // nullptr for a 0-byte storage. On meta, an address with nothing behind it.
  void* data() const { return alloc_.ptr; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  bool pinned() const { return pinned_; }
  bool has_bytes() const { return device_.has_bytes(); }
  // False for wrapped external memory.
  bool from_allocator() const { return allocator_ != nullptr; }
  // Counts the in-place writes made through the front-ends (copy_, fill_, add_, the optimizer
  // updates, normal_), on every device, meta included: a cache of something computed from
  // these bytes compares it to notice a write (autograd/autocast_cache.h). Writes through a
  // raw data pointer are not counted.
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }
  // The ledger category of the bytes (other for wrapped memory).
  Category category() const {
    return allocator_ ? allocator_->category_of(alloc_) : Category::other;
  }
  // Gives the block a new category and label in its allocator's ledger (Note [Retagging a
  // live block] in tensor/memory/caching_allocator.h); a no-op for wrapped memory.
  void retag(Category category, uint32_t label) {
    if (allocator_) allocator_->retag(alloc_, category, label);
  }
  // Note [Blocks other streams use]: `stream` of the block's allocator reads or writes the
  // bytes too (a no-op for wrapped memory).
  void record_stream(int stream) {
    if (allocator_) allocator_->record_stream(alloc_, stream);
  }

 private:
  Storage(CachingAllocator* allocator, Allocation alloc, size_t nbytes, Device device, bool pinned)
      : allocator_(allocator), alloc_(alloc), nbytes_(nbytes), device_(device), pinned_(pinned) {}

  CachingAllocator* allocator_;  // nullptr for wrapped memory
  Allocation alloc_;
  std::function<void()> release_;  // wrapped memory only
  size_t nbytes_;
  Device device_;
  bool pinned_;
  std::atomic<uint64_t> version_{0};
};

}  // namespace fitgrad
