// Storage allocation and release.
#include "tensor/storage.h"

namespace fitgrad {

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device, bool pinned) {
  FG_CHECK(!pinned || device.type == DeviceType::cpu,
           "[storage] pinned memory is host memory; {} cannot be pinned", device.str());
  CachingAllocator* allocator = pinned ? &pinned_allocator() : &allocator_for(device);
  Allocation alloc;
  if (nbytes > 0) alloc = allocator->allocate(nbytes);
  return std::shared_ptr<Storage>(new Storage(allocator, alloc, nbytes, device, pinned));
}

Storage::~Storage() { allocator_->free(alloc_); }

}  // namespace fitgrad
