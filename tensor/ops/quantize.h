// Front-ends of bitsandbytes' 4-bit blockwise quantization (tensor/quant/four_bit.h): the
// quantized state of a tensor as tensors, so it lives in the memory ledger (under the
// caller's category, quantized_weight for a frozen base) and a dry run on meta allocates it
// as the real run does.
#pragma once

#include "tensor/quant/four_bit.h"
#include "tensor/tensor.h"

namespace fitgrad::ops {

struct FourBitOptions {
  quant::FourBitType type = quant::FourBitType::nf4;
  int64_t blocksize = 64;
  bool double_quant = true;
};

// A tensor of n values in 4 bits: packed u8 ((n + 1) / 2); absmax f32 (blocks), or with
// double quantization nested u8 (blocks), absmax2 f32 (ceil(blocks / 256)) and offset f32
// (1) in its place (absmax undefined). shape is the original tensor's.
struct FourBit {
  FourBitOptions options;
  Shape shape;
  Tensor packed, absmax, nested, absmax2, offset;
  int64_t numel() const { return fitgrad::numel(shape); }
  // The bytes of every tensor above.
  int64_t nbytes() const;
};

// Quantizes a (contiguous, floating). The absmaxes that double quantization replaces are a
// temporary freed before it returns.
FourBit quantize_4bit(const Tensor& a, const FourBitOptions& options);
// Dequantizes into a new tensor of q.shape in `dtype` (f32, bf16 or f16).
Tensor dequantize_4bit(const FourBit& q, DType dtype);

// The rows `ids` (i32 or i64, any shape) of a quantized 2-D q (V, C), dequantized exactly
// as dequantize_4bit would give them: (ids..., C) in `dtype`. Throws "[embedding_4bit] id
// ... is out of range" for an id outside [0, V).
Tensor embedding_4bit(const FourBit& q, const Tensor& ids, DType dtype);

// x (..., in) floating times the quantized weight q (out, in) transposed -> (..., out) in
// x's dtype, read from the 4-bit codes without a dequantized copy of the weight (Note
// [Four-bit matvec] in tensor/cpu/four_bit_matvec.cpp): computed in f32, for the few rows
// of a decoding step (its cost grows with the rows; a GEMM on dequantize_4bit serves many).
Tensor linear_4bit(const Tensor& x, const FourBit& q);

}  // namespace fitgrad::ops
