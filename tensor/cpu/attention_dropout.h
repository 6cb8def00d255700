// The dropout steps of flash attention's cpu tiles (Note [Dropout inside flash attention] in
// tensor/ops/attention.h): each tile's dropout factors (0 or 1 / (1 - p)) are regenerated
// from the Philox draws of its elements' flat indices in the (batch, hq, t, s)
// probabilities, with dropout's keep rule (tensor/random/dropout_mask.h), and applied to a
// probability tile (row stride kTileK, attention_tile.h) in the forward, or to a probability
// and a gradient tile in the backward. Nothing is stored between the passes.
#pragma once

#include <cstdint>

#include "tensor/cpu/attention.h"

namespace fitgrad::cpu {

// The factors of one tile: element (r, j) takes draw first + r * stride + j of seed.
struct TileDropout {
  uint64_t seed = 0;
  uint64_t first = 0;   // the draw of element (0, 0)
  uint64_t stride = 0;  // s: draws between the tile's rows
  double p = 0;
  float scale = 1;  // dropout_scale(p)
};

// The factors of the tile of (batch x query head) bh whose first query is q0 and first key
// j0.
TileDropout tile_dropout(const AttentionDims& dims, const AttentionDropout& dropout, int64_t bh,
                         int64_t q0, int64_t j0);

// s(r, j) *= factor(r, j) for r < nq, j < nk: the tile's probabilities dropped.
void dropout_tile(int64_t nq, int64_t nk, const TileDropout& drop, float* s);

// With M the factors: ds := p * (M * dp - delta_r) written over dp (dp = dout v^T), then
// p := M * p, for r < nq, j < nk; columns j >= nk of ds become p * (dp - delta_r) as in
// softmax_grad_tile (p is 0 there).
void dropout_softmax_grad_tile(int64_t nq, int64_t nk, const TileDropout& drop, float* p,
                               const float* delta, float* dp);

}  // namespace fitgrad::cpu
