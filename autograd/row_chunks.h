// Row-chunked recompute (issue 27): functions of the rows of a 2-d tensor that run a few
// rows at a time in forward, keep only their input for backward, and recompute one chunk
// at a time there, so that no chunk's intermediates outlive the chunk.
//
//   tiled_rows(fn, x, rows)          fn over row tiles of x: (N, C) -> (N, C'), for a
//                                    per-token fn such as a block's norm + MLP (tiled MLP)
//   chunked_head_cross_entropy(...)  the mean cross-entropy of head(x) without any (N, V)
//                                    tensor: the fused, chunked head and loss
//   chunked_head_token_logprobs(...) each row's log-probability of its target under
//                                    head(x), the same way (the per-token terms of RL losses)
//
// Note [Row-chunked recompute]
// Both record one node that saves x (and the generator state before each chunk). Its
// backward runs each chunk again on a private tape with grad on, under the forward's
// autocast mode and generator state, seeds that chunk's output gradient (a slice of the
// incoming one, or the cross-entropy gradient of the chunk's logits), backpropagates, and
// writes the chunk's input gradient into its rows of dx. Parameters used by fn accumulate
// their gradients chunk by chunk through the inner backward, as in checkpoint(); their
// hooks fire when the outer backward is done with them (Note [Final gradients and hooks]).
// The price is one more forward of fn per chunk in backward. Chunks run in row order in
// both passes, so results are deterministic; against the unchunked op, weight gradients
// are sums over chunks instead of one GEMM's sum, equal to float rounding. fn's random
// draws (dropout) are per chunk: the same in forward and recompute, not those of an
// unchunked call.
//
// Note [Fused head and loss]
// A language model's logits (N, V) are the largest tensors of a long-context step (8B
// Llama at 128k tokens: 128k x 128,256 bf16 = 31 GiB). chunked_head_cross_entropy computes
// head(x_c) for `chunk` rows at a time, feeds each chunk into one cross-entropy
// accumulation (ops::cross_entropy_begin/add_rows: a shared log-sum-exp vector and the
// device statistics, the mean set after the last chunk), and drops the chunk's logits. The
// backward recomputes each chunk's logits, turns them into their gradient in place (the
// cross-entropy gradient of a row needs only that row, lse and the global count), and
// backpropagates through the head. The head may be anything row-wise: a tied embedding,
// an NF4 weight, LoRA on the head. Peak: one chunk's logits and their gradient.
//
// Note [Fused head and per-token log-probabilities]
// Objectives that weight each token on its own (GRPO's clipped ratios, its KL to the
// reference) need log p(t_i) of every row, not one mean. chunked_head_token_logprobs walks
// the chunks as above: the chunk's logits feed the same cross-entropy accumulation, which
// leaves each row's log-sum-exp, and the target's logit is picked out of the chunk (an
// embedding lookup into the logits seen as (m V, 1)), so log p = logit[t] - lse; rows
// whose target is ignore_index give 0. Their targets are replaced by a valid class before
// the accumulation, so it counts every row and its backward, handed a loss gradient equal
// to that count, returns softmax - onehot of a row unscaled. The backward recomputes each
// chunk's logits, takes that, and scales row i by -dlogp_i (0 for ignored rows): the
// gradient of log p(t_i) is onehot - softmax. Peak: one chunk's logits, their gradient and
// its scaled copy. The optional entropy, -sum p log p = lse - sum p logit per row, is
// computed from the same chunk in f32 and carries no gradient (a metric).
#pragma once

#include <functional>

#include "tensor/tensor.h"

namespace fitgrad::autograd {

using RowFn = std::function<Tensor(const Tensor&)>;

// fn over rows [r, r + rows) of x (N, C) for each tile, concatenated: (N, C'). fn must map
// each row on its own (row i of the output depends only on row i of the input) and be
// deterministic given the generator state. rows >= 1; rows >= N is one tile (still
// recomputed in backward).
Tensor tiled_rows(const RowFn& fn, const Tensor& x, int64_t rows);

// The mean cross-entropy over non-ignored targets of head(x): x (N, C), head maps (n, C)
// to logits (n, V) row by row, targets (N) i32/i64. chunk rows at a time (>= 1). A scalar,
// equal to cross_entropy(head(x), targets) to float rounding.
Tensor chunked_head_cross_entropy(const RowFn& head, const Tensor& x, const Tensor& targets,
                                  int64_t chunk, int64_t ignore_index = -100);

// Each row's log softmax(head(x_i))[t_i]: x (N, C), head as above, targets (N) i32/i64 ->
// (N) f32, 0 (and no gradient) where the target is ignore_index; chunk rows at a time
// (>= 1). Equal to log_softmax(head(x)) gathered at targets, to float rounding (Note [Fused
// head and per-token log-probabilities]). entropy, when not null, receives each row's
// entropy of softmax(head(x_i)) (N) f32 without gradient, 0 where ignored. The targets are
// read on the host (a host read, Note [Host reads] in tensor/host_reads.h).
Tensor chunked_head_token_logprobs(const RowFn& head, const Tensor& x, const Tensor& targets,
                                   int64_t chunk, int64_t ignore_index = -100,
                                   Tensor* entropy = nullptr);

// The tile or chunk size that splits n rows into ceil(n / target) near-equal parts (at
// least 1 row each): the rule the model uses for its automatic tile sizes.
int64_t even_chunk_rows(int64_t n, int64_t target);

}  // namespace fitgrad::autograd
