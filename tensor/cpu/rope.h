// CPU kernels of the rotary position embedding (Hugging Face Llama convention: element i
// pairs with element i + D/2 of the same head vector and both rotate by the angle of
// frequency i). The front-end (tensor/ops/rope.h) fills a cos/sin table once per call and
// the kernel applies it to every (batch, head) row.
#pragma once

#include <cstdint>

#include "tensor/half.h"
#include "tensor/rope_params.h"

namespace fitgrad::cpu {

// table[0][t][i] = cos(a), table[1][t][i] = sin(a), a = (position_offset + t) * f_i, f_i the
// frequency of pair i (Note [RoPE frequencies] in tensor/rope_params.h), all in double
// (within a block of positions by rotation, Note [RoPE table by rotation] in rope.cpp) and
// rounded to f32 at the end.
void rope_table_f32(float* table,  // (2, T, D/2)
                    int64_t T, int64_t D, int64_t position_offset, const RopeParams& rope);

// Rotates each pair (x[i], x[i + D/2]) of every row by +angle, or by -angle when `inverse`
// (the backward pass: the transpose of a rotation is the rotation by the negative angle).
// Position t of a row takes the table's row t, or with `positions` (B, T), H rows a batch
// row, the table's row positions[b][t] (packed rows, Note [Packed rows] in
// tensor/backend/attention_mask.h). E is float, BFloat16 or Half: each element is widened to
// f32, rotated in f32 and rounded once into E.
template <class E>
void rope(const E* x,          // (BH, T, D)
          const float* table,  // (2, T, D/2)
          E* y,                // (BH, T, D)
          int64_t BH, int64_t T, int64_t D, bool inverse, const int32_t* positions = nullptr,
          int64_t H = 1);
#define FITGRAD_ROPE(E)                                                                  \
  extern template void rope(const E*, const float*, E*, int64_t, int64_t, int64_t, bool, \
                            const int32_t*, int64_t);
FITGRAD_ROPE(float)
FITGRAD_ROPE(BFloat16)
FITGRAD_ROPE(Half)
#undef FITGRAD_ROPE

}  // namespace fitgrad::cpu
