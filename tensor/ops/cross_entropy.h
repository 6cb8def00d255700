// Fused, chunked cross-entropy (DESIGN.md, Numerics): log-softmax and the negative
// log-likelihood in one pass over row chunks, so that f32 copies of (N, V) bf16/f16 logits
// or of their gradient never exist at once. Raw ops: no autograd here (autograd/ wires
// the backward). Logits are f32, f16 or bf16 and computed in f32; lse and the loss are
// f32; dlogits come back in the logits' dtype (Note [Op dtypes and devices]).
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace fitgrad::ops {

struct CrossEntropyOut {
  Tensor loss;  // () f32: mean over the rows whose target is not ignore_index
  Tensor lse;   // (N) f32: log-sum-exp of each row of logits, saved for backward
  // (4) f32 holding two doubles on the logits' device: the summed negative log-likelihood
  // and the rows whose target is not ignore_index (Note [Cross-entropy statistics on the
  // device] in tensor/backend/kernel_args.h). The backward reads the count from it there.
  Tensor stats;
  // That count, read on the host (a host read, Note [Host reads]); N on meta, where targets
  // have no values.
  int64_t count() const;
  // The summed negative log-likelihood, read on the host with the count; 0 on meta.
  double nll_sum() const;
};

// Mean cross-entropy of logits (N, V) against targets (N), i32 or i64. A target must be in
// [0, V) or equal ignore_index; anything else throws naming the row and the value (on a
// device, at the next check of its error flags: kernel_args.h's Note). When
// every row is ignored the loss is 0 (Note [Cross-entropy with every target ignored] in
// cross_entropy.cpp). chunk_rows bounds the rows handed to the kernels at once, and so the
// f32 scratch of logits that are staged (Note [Cross-entropy chunking] there: not f32 or
// bf16 read in place); 0 picks it so that scratch is about 4 MiB. The chunking never
// changes the result.
CrossEntropyOut cross_entropy(const Tensor& logits,   // (N, V)
                              const Tensor& targets,  // (N) i32 or i64
                              int64_t ignore_index = -100, int64_t chunk_rows = 0);

// The same, for logits that arrive a block of rows at a time (Note [Fused head and loss] in
// autograd/row_chunks.h). cross_entropy_begin allocates the loss, lse and statistics of N
// rows; cross_entropy_add_rows adds logits (n, V) of rows [first_row, first_row + n) with
// their targets (n) and sets the loss when first_row + n == N. Each row once; the result
// equals cross_entropy over all rows when the blocks arrive in row order.
CrossEntropyOut cross_entropy_begin(int64_t n, Device device);
void cross_entropy_add_rows(CrossEntropyOut& out,
                            const Tensor& logits,   // (n, V)
                            const Tensor& targets,  // (n) i32 or i64
                            int64_t first_row, int64_t ignore_index = -100, int64_t chunk_rows = 0);

// dlogits (N, V) in logits' dtype: dloss / count * (softmax(logits) - onehot(target)) per
// row, zero rows where the target is ignore_index (and everywhere when count is 0). dloss
// is an f32 scalar on the logits' device, read there with the count (no host read).
// lse and stats are those cross_entropy returned; computed chunk by chunk like the forward,
// with chunk_rows as there (0: the default; the chunking never changes the result).
// overwrite_logits: when logits are f32 and contiguous, the gradient is written over them
// and returned as the same tensor (no (N, V) allocation); the caller guarantees that
// nothing reads the logits afterwards. Other logits get a fresh tensor as usual.
Tensor cross_entropy_backward(const Tensor& dloss,    // () loss gradient
                              const Tensor& logits,   // (N, V)
                              const Tensor& targets,  // (N) i32 or i64
                              const Tensor& lse,      // (N) f32
                              const Tensor& stats,    // (4) f32, cross_entropy's
                              int64_t ignore_index = -100, bool overwrite_logits = false,
                              int64_t chunk_rows = 0);

// The rows cross_entropy takes at once for chunk_rows = 0 and V classes: the f32 scratch of
// one staged chunk is at most 4 MiB, and at least one row.
int64_t cross_entropy_default_chunk_rows(int64_t v);

}  // namespace fitgrad::ops
