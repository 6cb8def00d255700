// Rotary position embedding (RoPE), raw front-end (no autograd) and its backward function,
// in the Hugging Face Llama convention ("rotate_half"): in each head vector of size D,
// element i and element i + D/2 form a pair that rotates by the angle
// (position_offset + t) * f_i, t being the position in the sequence and f_i = theta^(-2i/D)
// or its scaling (Note [RoPE frequencies] in tensor/rope_params.h). Inputs are
// f32, f16 or bf16 and results keep the input dtype (Note [Op dtypes and devices]).
#pragma once

#include <cstdint>

#include "tensor/rope_params.h"
#include "tensor/tensor.h"

namespace fitgrad::ops {

// The positions of packed rows (Note [Packed rows] in tensor/backend/attention_mask.h), whose
// examples each count from 0: ids (B, T) i32 on x's device, each in [0, T), and `longest`,
// the longest example's length, which stands for the sequence's length where the scaling
// depends on it (longrope's list, dynamic NTK's base), as transformers takes
// max(position_ids) + 1. Undefined ids: position t of every row is position_offset + t.
struct RopePositions {
  Tensor ids;
  int64_t longest = 0;
};

// x (B, H, T, D) with D even -> the rotated (B, H, T, D). position_offset >= 0 is the
// position of t = 0 (the number of cached tokens during generation); rope.theta > 0 is the
// base (10000 in Llama 2, 500000 in Llama 3), with its scaling.
Tensor rope(const Tensor& x, int64_t position_offset, const RopeParams& rope,
            const RopePositions& positions = {});

// The gradient of rope: dy rotated by the negative angles.
Tensor rope_backward(const Tensor& dy, int64_t position_offset, const RopeParams& rope,
                     const RopePositions& positions = {});

}  // namespace fitgrad::ops
