// Dropout inside the cuda flash kernels (attention_flash*.cu; Note [Dropout inside flash
// attention] in tensor/ops/attention.h): the factor of probability
// (bh, i, j), 0 or 1 / (1 - p), from the Philox draw of its flat index in the (B, Hq, T, S)
// probabilities, with the keep rule of tensor/random/dropout_mask.h, whose constexpr
// functions run here unchanged. So a card drops exactly the elements the CPU kernels and
// ops::dropout drop for the same RngState. Every element computes its own Philox block (a
// fragment's elements are scattered over rows), four times the draws' work; next to a
// tile's products that is small, and it keeps the kernels' layouts as they are.
#pragma once

#include <cstdint>

#include "cuda/kernels/attention_launch.h"
#include "tensor/random/dropout_mask.h"

namespace fitgrad::cuda {

struct FlashDropout {
  double p = 0;  // 0: no dropout
  float scale = 1;
  uint64_t seed = 0, offset = 0;
  int64_t t = 0, s = 0;

  __host__ __device__ bool on() const { return p > 0; }
  // The factor of query i's probability of key j in (batch x query head) bh.
  __device__ __forceinline__ float factor(int64_t bh, int64_t i, int64_t j) const {
    return dropout_factor(seed, offset + uint64_t((bh * t + i) * s + j), p, scale);
  }
};

inline FlashDropout flash_dropout(const AttentionSizes& x) {
  return {x.dropout_p, dropout_scale(x.dropout_p), x.dropout_seed, x.dropout_offset, x.t, x.s};
}

}  // namespace fitgrad::cuda
