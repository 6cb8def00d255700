// Embedding lookup: raw front-end (no autograd) and its backward function. The forward
// pass gathers rows of the (V, C) table and works in the table's own dtype, as it does no
// arithmetic (Note [Embedding gathers in the storage dtype]); the backward pass
// scatter-adds in f32 and is deterministic (Note [Deterministic embedding backward] in
// tensor/cpu/embedding.cpp).
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace fitgrad::ops {

// weight (V, C) f32/f16/bf16, ids i32 or i64 of any shape -> (ids..., C) in weight's dtype.
// Throws "[embedding] id ... is out of range for V embeddings" for an id outside [0, V).
Tensor embedding(const Tensor& weight, const Tensor& ids);

// dy (ids..., C) -> dweight (num_embeddings, C) in dy's dtype: row v is the sum of the rows
// of dy whose id is v, in position order.
Tensor embedding_backward(const Tensor& dy, const Tensor& ids, int64_t num_embeddings);

}  // namespace fitgrad::ops
