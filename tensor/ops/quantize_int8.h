// Front-ends of Q-GaLore's int8 group quantization (tensor/quant/int8.h, Note [Int8
// weights]): the quantized state of a weight as tensors, so it lives in the memory ledger
// (under the caller's category and label, quantized_weight for an int8 weight) and a dry run
// on meta allocates it as the real run does. requantize_int8_ writes an existing state in
// place (the optimizer's write-back), so a weight's tensors keep their identity and blocks.
#pragma once

#include "tensor/backend/kernel_args.h"
#include "tensor/tensor.h"

namespace fitgrad::ops {

// A tensor of n values in 8 bits: codes u8 (shape), scales f32 (n / group_size), zeros u8
// (n / group_size).
struct Int8 {
  int64_t group_size = 256;
  Tensor codes, scales, zeros;
  const Shape& shape() const { return codes.shape(); }
  int64_t numel() const { return codes.numel(); }
  int64_t nbytes() const { return codes.nbytes() + scales.nbytes() + zeros.nbytes(); }
};

// An uninitialised state for a tensor of `shape` (allocated under the current scope).
// Throws naming --weight_group_size unless group_size divides the count.
Int8 empty_int8(const Shape& shape, int64_t group_size, Device device);
// Quantizes a (contiguous, floating) to nearest into a new state.
Int8 quantize_int8(const Tensor& a, int64_t group_size);
// Quantizes a (contiguous, floating, q's shape and device) into q in place: scales and zeros
// recomputed from a, codes rounded stochastically from sr when sr.enabled, else to nearest.
void requantize_int8_(Int8& q, const Tensor& a, const backend::StochasticRounding& sr);
// Dequantizes into a new tensor of q's shape in `dtype` (f32, bf16 or f16).
Tensor dequantize_int8(const Int8& q, DType dtype);

}  // namespace fitgrad::ops
