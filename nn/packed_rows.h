// The examples a batch of packed rows holds (Note [Packed rows] in
// tensor/backend/attention_mask.h): what the attention layers and the position embeddings of
// a decoder need to keep each example to itself. A training step builds it from the loader's
// batch (data/loader.h) on the model's device and keeps it until the step's backward is
// done, since the attention masks borrow `segments`.
#pragma once

#include "tensor/ops/rope.h"
#include "tensor/tensor.h"

namespace fitgrad::nn {

struct PackedRows {
  Tensor segments;               // (2, B, T) i32: each position's example [begin, end) in its row
  ops::RopePositions positions;  // ids (B, T) i32: each position within its example, from 0
};

}  // namespace fitgrad::nn
