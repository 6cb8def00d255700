// The host and virtual raw sources, the registry of backend sources, and the
// per-device allocator singletons.
#include <sys/mman.h>

#include <cstdlib>
#include <map>
#include <mutex>

#include "tensor/memory/caching_allocator.h"

namespace fitgrad {

namespace {

class HostSource final : public RawSource {
 public:
  void* allocate(size_t bytes) override { return std::aligned_alloc(kPageAlign, bytes); }
  void release(void* ptr, size_t) override { std::free(ptr); }

  // Note [Expandable host memory]
  // A reservation is an inaccessible anonymous mapping that takes no memory (PROT_NONE,
  // MAP_NORESERVE); map() replaces a range of it by fresh read-write pages and unmap() by
  // inaccessible ones again, which gives the pages back to the system at once.
  void* reserve(size_t bytes) override {
    void* p = ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  bool map(void* ptr, size_t bytes) override {
    return ::mmap(ptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
                  0) == ptr;
  }
  void unmap(void* ptr, size_t bytes) override {
    void* p = ::mmap(ptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
                     -1, 0);
    FG_CHECK(p == ptr, "[memory] cpu: unmapping {} bytes of an expandable segment failed", bytes);
  }
  void release_reservation(void* ptr, size_t bytes) override { ::munmap(ptr, bytes); }

 private:
  // Segments are multiples of 2 MiB, so page alignment costs nothing.
  static constexpr size_t kPageAlign = 4096;
};

// Note [Virtual addresses for meta]
// The meta source hands out addresses from a bump pointer in a range no process maps,
// with no memory behind them, and never reuses one. The allocator's policy runs
// unchanged on top, so a dry run on meta reserves and splits exactly as a real run.
class VirtualSource final : public RawSource {
 public:
  void* allocate(size_t bytes) override {
    std::lock_guard lock(mutex_);
    const uintptr_t addr = next_;
    next_ += (bytes + kAlign - 1) / kAlign * kAlign;
    return reinterpret_cast<void*>(addr);
  }
  void release(void*, size_t) override {}
  // A reservation is a range of addresses like a segment's; mapping has nothing to back.
  void* reserve(size_t bytes) override { return allocate(bytes); }
  bool map(void*, size_t) override { return true; }
  bool has_bytes() const override { return false; }

 private:
  static constexpr size_t kAlign = size_t(2) << 20;
  std::mutex mutex_;
  uintptr_t next_ = uintptr_t(1) << 56;
};

struct Registry {
  std::mutex mutex;
  std::map<std::string, RawSourceFactory> factories;
  std::map<std::pair<int, int>, CachingAllocator*> allocators;  // (device type, index)
  CachingAllocator* pinned = nullptr;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: storages may outlive statics
  return *r;
}

}  // namespace

std::unique_ptr<RawSource> make_host_source() { return std::make_unique<HostSource>(); }
std::unique_ptr<RawSource> make_virtual_source() { return std::make_unique<VirtualSource>(); }

void register_raw_source(const std::string& kind, RawSourceFactory factory) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.factories[kind] = std::move(factory);
}

const RawSourceFactory* find_raw_source(const std::string& kind) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.factories.find(kind);
  return it == r.factories.end() ? nullptr : &it->second;
}

CachingAllocator& allocator_for(Device device) {
  const RawSourceFactory* cuda =
      device.type == DeviceType::cuda ? find_raw_source("cuda") : nullptr;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto key = std::make_pair(int(device.type), device.index);
  auto it = r.allocators.find(key);
  if (it != r.allocators.end()) return *it->second;
  std::unique_ptr<RawSource> source;
  switch (device.type) {
    case DeviceType::cpu: source = make_host_source(); break;
    case DeviceType::meta: source = make_virtual_source(); break;
    case DeviceType::cuda:
      FG_CHECK(cuda != nullptr, "[device] {} is not available: fitgrad was built without CUDA",
               device.str());
      source = (*cuda)(device.index);
      break;
  }
  auto* a = new CachingAllocator(device, std::move(source));
  r.allocators.emplace(key, a);
  return *a;
}

CachingAllocator& pinned_allocator() {
  const RawSourceFactory* pinned = find_raw_source("pinned");
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (!r.pinned) {
    FG_CHECK(pinned != nullptr,
             "[device] pinned host memory is not available: fitgrad was built without CUDA");
    r.pinned = new CachingAllocator(Device::cpu(), (*pinned)(0));
  }
  return *r.pinned;
}

}  // namespace fitgrad
