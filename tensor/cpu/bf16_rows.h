// Contiguous runs of bf16 widened to f32 and f32 rounded to bf16, vectorised for the ISA
// level in force (Note [Kernel ISA variants] in vec.h). Element for element the same values
// as bf16_bits_to_f32 and f32_to_bf16_bits (tensor/half.h): round to nearest even, NaN kept
// quiet.
#pragma once

#include <cstdint>

#include "tensor/half.h"

namespace fitgrad::cpu {

// dst[i] = float(src[i]) for i < n.
void widen_bf16(const BFloat16* src, int64_t n, float* dst);

// dst[i] = BFloat16(src[i]) for i < n.
void round_to_bf16(const float* src, int64_t n, BFloat16* dst);

}  // namespace fitgrad::cpu
