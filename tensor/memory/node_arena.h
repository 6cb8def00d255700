// Free lists for the caching allocator's own small objects (its Blocks and the nodes of
// its free-block sets), so that the bookkeeping of a cached alloc+free never calls
// malloc. Not thread-safe: the allocator uses it under its own lock.
#pragma once

#include <array>
#include <cstddef>
#include <new>

namespace fitgrad {

class NodeArena {
 public:
  NodeArena() = default;
  NodeArena(const NodeArena&) = delete;
  NodeArena& operator=(const NodeArena&) = delete;
  ~NodeArena() {
    for (Bin& bin : bins_)
      while (bin.head) {
        FreeNode* next = bin.head->next;
        ::operator delete(bin.head);
        bin.head = next;
      }
  }

  void* get(size_t size) {
    Bin& bin = bin_for(size);
    if (!bin.head) return ::operator new(size < sizeof(FreeNode) ? sizeof(FreeNode) : size);
    FreeNode* n = bin.head;
    bin.head = n->next;
    return n;
  }

  void put(void* p, size_t size) {
    Bin& bin = bin_for(size);
    auto* n = static_cast<FreeNode*>(p);
    n->next = bin.head;
    bin.head = n;
  }

 private:
  struct FreeNode {
    FreeNode* next;
  };
  struct Bin {
    size_t size = 0;
    FreeNode* head = nullptr;
  };
  // A handful of distinct sizes are ever used; each gets the first empty bin.
  Bin& bin_for(size_t size) {
    for (Bin& bin : bins_) {
      if (bin.size == size) return bin;
      if (bin.size == 0) {
        bin.size = size;
        return bin;
      }
    }
    throw std::bad_alloc();  // more distinct node sizes than bins: a programming error
  }
  std::array<Bin, 4> bins_{};
};

// A std allocator over a NodeArena for node-based containers (std::set).
template <class T>
struct ArenaAllocator {
  using value_type = T;
  NodeArena* arena;
  explicit ArenaAllocator(NodeArena* a) : arena(a) {}
  template <class U>
  ArenaAllocator(const ArenaAllocator<U>& o) : arena(o.arena) {}
  T* allocate(size_t n) {
    if (n == 1) return static_cast<T*>(arena->get(sizeof(T)));
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) {
    if (n == 1) {
      arena->put(p, sizeof(T));
    } else {
      ::operator delete(p);
    }
  }
  template <class U>
  bool operator==(const ArenaAllocator<U>& o) const {
    return arena == o.arena;
  }
};

}  // namespace fitgrad
