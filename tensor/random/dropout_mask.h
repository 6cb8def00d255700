// The keep rule of inverted dropout, in one place for every kernel that drops: ops::dropout's
// cpu and cuda kernels and the dropout inside flash attention (cpu and cuda; Note [Dropout
// inside flash attention] in tensor/ops/attention.h). Element i of a call whose draws start
// at `offset` takes the uniform u of Philox draw offset + i (Note [Philox streams]) and is
// kept iff u >= p, scaled by 1 / (1 - p) computed in double and rounded to f32 (Note
// [Dropout keeps no mask] in tensor/ops/dropout.h). The functions are constexpr, so the cuda
// kernels run them unchanged (--expt-relaxed-constexpr), and a fused kernel that drops
// element i decides exactly as ops::dropout does for element i of the same state.
#pragma once

#include <cstdint>

#include "tensor/random/philox.h"

namespace fitgrad {

// Whether the element whose uniform is u survives dropout with probability p.
constexpr bool dropout_keeps(float u, double p) { return double(u) >= p; }

// The factor kept elements are multiplied by.
constexpr float dropout_scale(double p) { return float(1.0 / (1.0 - p)); }

// The factor of the element that takes draw `draw` of `seed`: `scale` (dropout_scale(p)) if
// it is kept, else 0. One Philox block per call: a kernel that owns four consecutive draws
// should use dropout_factors.
constexpr float dropout_factor(uint64_t seed, uint64_t draw, double p, float scale) {
  return dropout_keeps(philox_uniform(seed, draw), p) ? scale : 0.0f;
}

// factor[i] = dropout_factor(seed, offset + i, p, scale) for i in [0, n), on the calling
// thread, one Philox block per four draws.
constexpr void dropout_factors(uint64_t seed, uint64_t offset, int64_t n, double p, float scale,
                               float* factor) {
  philox_for_each_uniform_serial(
      seed, offset, n, [&](int64_t i, float u) { factor[i] = dropout_keeps(u, p) ? scale : 0.0f; });
}

}  // namespace fitgrad
