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

std::shared_ptr<Storage> Storage::wrap(void* data, size_t nbytes, std::function<void()> release,
                                       Device device) {
  FG_CHECK(device.type == DeviceType::cpu || (device.type == DeviceType::meta && data == nullptr),
           "[storage] wrap takes host memory, or no bytes on meta; got {}", device.str());
  Allocation alloc;
  alloc.ptr = data;
  alloc.size = nbytes;
  alloc.requested = nbytes;
  auto s = std::shared_ptr<Storage>(new Storage(nullptr, alloc, nbytes, device, false));
  s->release_ = std::move(release);
  return s;
}

Storage::~Storage() {
  if (allocator_) {
    allocator_->free(alloc_);
  } else if (release_) {
    release_();
  }
}

}  // namespace fitgrad
