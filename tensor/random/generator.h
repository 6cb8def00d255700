// The random number generator state that ops draw from (DESIGN.md, Numerics). A Generator
// is only a (seed, offset) pair: an op reserves n draws, which advances the offset by n,
// and computes its numbers from the returned state with Philox (philox.h). Saving the
// state and setting it back later replays exactly the same numbers, which is how
// checkpoint recompute and resumed runs reproduce dropout.
#pragma once

#include <cstdint>
#include <mutex>

#include "tensor/tensor.h"

namespace fitgrad {

// The first draw an op will use: draw index `offset` of `seed` (Note [Philox streams]).
struct RngState {
  uint64_t seed = 0;
  uint64_t offset = 0;
  bool operator==(const RngState&) const = default;
};

// Thread-safe: concurrent reserve() calls get disjoint draw ranges.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : state_{seed, 0} {}
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  RngState state() const;
  void set_state(const RngState& state);
  // Seed `seed`, offset 0.
  void manual_seed(uint64_t seed) { set_state({seed, 0}); }
  // Reserves n draws: returns the state they start at and advances the offset by n.
  RngState reserve(uint64_t n);
  // A tensor of `shape` with uniforms in [lo, hi) from numel(shape) reserved draws,
  // computed in f32 and stored as floating `dtype`. On meta it is allocated and the draws
  // are still reserved, so a dry run leaves the generator where the real run would.
  Tensor uniform(const Shape& shape, double lo = 0.0, double hi = 1.0, DType dtype = DType::f32,
                 Device device = Device::cpu());

 private:
  mutable std::mutex mutex_;
  RngState state_;
};

// The process-wide generator ops use when none is given (seed 0 until manual_seed).
Generator& default_generator();

}  // namespace fitgrad
