// CPU kernels of embedding: a row gather in the forward pass and a deterministic
// scatter-add in the backward pass (Note [Deterministic embedding backward]). Ids are i32
// or i64; every id is checked against V before any row is touched.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/half.h"

namespace fitgrad::cpu {

// out[i] = weight[ids[i]] for i in [0, n): rows of `row_bytes` bytes, copied as bytes (any
// dtype). Throws fitgrad::Error "[embedding] ..." naming the first id outside [0, V).
template <class Id>
void embedding_gather(const void* weight,  // (V, C)
                      const Id* ids,       // (n)
                      void* out,           // (n, C)
                      int64_t n, int64_t V, size_t row_bytes);

// dw = 0, then dw[ids[i]] += dy[i] for i in [0, n). Throws like embedding_gather.
template <class Id>
void embedding_scatter_add_f32(const float* dy,  // (n, C)
                               const Id* ids,    // (n)
                               float* dw,        // (V, C)
                               int64_t n, int64_t V, int64_t C);

// The same for E = BFloat16 or Half (Note [Low-precision embedding backward]): dw (V, C)
// in E, summed in f32 and rounded once. pairs is a workspace of 2 n int64 values.
template <class E, class Id>
void embedding_scatter_add_sorted(const E* dy,    // (n, C)
                                  const Id* ids,  // (n)
                                  E* dw,          // (V, C)
                                  int64_t n, int64_t V, int64_t C, int64_t* pairs);

}  // namespace fitgrad::cpu
