// Dropout steps of flash attention's cpu tiles (see attention_dropout.h). The factors of one
// tile row are drawn into a kTileK-float array on the stack, one Philox block per four keys,
// and the row is then scaled by them; rows are independent, so the result does not depend
// on the thread that runs the tile.
#include "tensor/cpu/attention_dropout.h"

#include "tensor/cpu/attention_tile.h"
#include "tensor/random/dropout_mask.h"

namespace fitgrad::cpu {

TileDropout tile_dropout(const AttentionDims& dims, const AttentionDropout& dropout, int64_t bh,
                         int64_t q0, int64_t j0) {
  const uint64_t first = dropout.offset + uint64_t((bh * dims.t + q0) * dims.s + j0);
  return {dropout.seed, first, uint64_t(dims.s), dropout.p, dropout_scale(dropout.p)};
}

void dropout_tile(int64_t nq, int64_t nk, const TileDropout& drop, float* s) {
  float factor[kTileK];
  for (int64_t r = 0; r < nq; ++r) {
    dropout_factors(drop.seed, drop.first + uint64_t(r) * drop.stride, nk, drop.p, drop.scale,
                    factor);
    float* sr = s + r * kTileK;
    for (int64_t j = 0; j < nk; ++j) sr[j] *= factor[j];
  }
}

void dropout_softmax_grad_tile(int64_t nq, int64_t nk, const TileDropout& drop, float* p,
                               const float* delta, float* dp) {
  float factor[kTileK];
  for (int64_t r = 0; r < nq; ++r) {
    dropout_factors(drop.seed, drop.first + uint64_t(r) * drop.stride, nk, drop.p, drop.scale,
                    factor);
    float* pr = p + r * kTileK;
    float* dpr = dp + r * kTileK;
    const float dr = delta[r];
    for (int64_t j = 0; j < nk; ++j) {
      dpr[j] = pr[j] * (factor[j] * dpr[j] - dr);
      pr[j] *= factor[j];
    }
    for (int64_t j = nk; j < kTileK; ++j) dpr[j] = pr[j] * (dpr[j] - dr);
  }
}

}  // namespace fitgrad::cpu
