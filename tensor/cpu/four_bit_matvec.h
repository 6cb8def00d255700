// The dequantizing matrix-vector product of a 4-bit weight (bitsandbytes' NF4 / FP4 layout,
// tensor/quant/four_bit.h): y = x W^T for a few rows of x, reading the packed nibbles and
// the block absmaxes directly, so that decoding streams 4.1 bits per weight instead of 32
// (Note [Four-bit matvec]).
#pragma once

#include <cstdint>

#include "tensor/quant/four_bit.h"

namespace fitgrad::cpu {

// The absmax of each block: an f32 per block, or bitsandbytes' double quantization of them
// (Note [Double quantization] in tensor/quant/four_bit.h), read as dequantize_absmax
// computes it (one product, one sum: this file is compiled without contraction).
struct BlockAbsmax {
  const float* absmax = nullptr;  // when set, the absmaxes themselves
  const uint8_t* codes = nullptr;
  const float* absmax2 = nullptr;
  float offset = 0.0f;
  const float* map = nullptr;  // the signed dynamic map (256 values)
  float operator()(int64_t b) const {
    if (absmax) return absmax[b];
    const float m = map[codes[b]] * absmax2[b / quant::kNestedBlocksize];
    return m + offset;
  }
};

// y (rows, out) = x (rows, in) W^T for W (out, in) quantized in blocks of `blocksize`
// (packed: out * in / 2 bytes, first value in the high nibble; absmax: each block's). `staging` holds
// rows * in floats of scratch. f32 throughout; each product is
// summed in f32 a block at a time and scaled by the block's absmax.
void four_bit_matvec(const uint8_t* packed, const BlockAbsmax& absmax, int64_t out, int64_t in,
                     int64_t blocksize, quant::FourBitType type, const float* x, int64_t rows,
                     float* staging, float* y);

}  // namespace fitgrad::cpu
