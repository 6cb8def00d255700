// Inverted dropout with Philox random numbers: raw front-end (no autograd) and its backward
// function. Inputs are f32, f16 or bf16 and results keep the input dtype (Note [Op dtypes
// and devices]).
//
// Note [Dropout keeps no mask]
// dropout reserves numel(x) draws from the generator and returns the RngState they start
// at. Element i is kept iff the uniform of draw state.offset + i of state.seed is >= p
// (Note [Philox streams]), and kept values are scaled by 1 / (1 - p). Backward recomputes
// the same keep decisions from the saved state instead of storing a mask: 16 bytes instead
// of numel bytes (a u8 mask) per dropout, which for activations of shape (B, T, C) is the
// size of the activation in u8. Recomputing costs one Philox block per four elements, cheap
// next to the memory it frees. A checkpoint recompute that sets the generator back to the
// saved state replays the same mask too.
#pragma once

#include "tensor/random/generator.h"
#include "tensor/tensor.h"

namespace fitgrad::ops {

struct DropoutOut {
  Tensor y;        // x's shape and dtype
  RngState state;  // where the draws of this call start: all backward needs
};
// p in [0, 1). p == 0 returns x itself and reserves no draws.
DropoutOut dropout(const Tensor& x, double p, Generator& gen = default_generator());

// dx = dy masked and scaled exactly as the forward pass of `state` masked x.
Tensor dropout_backward(const Tensor& dy, double p, const RngState& state);

}  // namespace fitgrad::ops
