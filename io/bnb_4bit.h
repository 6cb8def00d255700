// The tensors with which Hugging Face transformers saves a bitsandbytes 4-bit Linear
// weight (a `*-bnb-4bit` model), so that fitgrad writes files those tools load and loads
// theirs. For the weight `X.weight` of shape (out, in):
//   X.weight                                  u8 ((n + 1) / 2, 1): the packed codes
//   X.weight.absmax                           u8 (blocks) with double quantization, else f32
//   X.weight.quant_map                        f32 (16): the 4-bit code values
//   X.weight.nested_absmax                    f32 (ceil(blocks / 256))   (double quant only)
//   X.weight.nested_quant_map                 f32 (256): the signed dynamic map  (idem)
//   X.weight.quant_state.bitsandbytes__nf4    u8: JSON {quant_type, blocksize, dtype, shape,
//                                             nested_blocksize, nested_dtype, nested_offset}
// ("__fp4" for FP4). `dtype` is the weight's dtype before quantization (the dtype a
// dequantization returns by default).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "tensor/ops/quantize.h"

namespace fitgrad::io {

// The entries for weight `name` ("X.weight") quantized as `q` from a tensor of `dtype`.
std::vector<std::pair<std::string, Tensor>> bnb_4bit_entries(const std::string& name,
                                                             const ops::FourBit& q, DType dtype);
// Whether `file` holds `name` as a bitsandbytes 4-bit weight (its quant_state entry).
bool is_bnb_4bit(const SafetensorsFile& file, const std::string& name);
// Reads weight `name` back; throws naming the file and the entry on any inconsistency (a
// missing companion, a size that does not fit the shape, an unknown quant_type, a quant_map
// other than NF4's or FP4's values, a nested map other than the dynamic map). `dtype`, when
// given, receives the weight's original dtype.
ops::FourBit read_bnb_4bit(const SafetensorsFile& file, const std::string& name,
                           DType* dtype = nullptr);

}  // namespace fitgrad::io
