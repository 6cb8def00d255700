// bitsandbytes' dynamic 8-bit quantization maps (Dettmers et al. 2022, "8-bit Optimizers via
// Block-wise Quantization"): 256 sorted f32 code values in [-1, 1] (signed) or [0, 1]
// (unsigned), dense near zero and sparse near one, so that a block of values scaled by its
// absmax keeps relative precision over seven orders of magnitude. Adam8bit quantizes its
// first moment with the signed map and its second with the unsigned one; NF4's double
// quantization uses the signed map for the absmaxes.
//
// Note [Dynamic map values]
// The maps are bitsandbytes' create_dynamic_map(signed, max_exponent_bits = 7, total_bits =
// 8), value for value: for exponent i = 0..6, the f32 midpoints of torch's f32
// linspace(0.1, 1, n) (n = 2^i + 1 signed, 2^(i+1) + 1 unsigned; its exact CPU rounding is
// in dynamic_map.cpp), each times the f32 10^(i - 6), negated as well for the signed map;
// then 0 and 1, sorted. Signed: index 0 is about -0.99297, 127 is 0, 255 is 1; unsigned: index 1
// is 3.25e-7, 254 about 0.99648, 255 is 1 (tests/tensor/quant/dynamic_map_test.cpp, against
// these published values and against tests/golden/optim_adam8bit.gtb's maps).
#pragma once

#include <array>
#include <cstdint>

namespace fitgrad::quant {

using CodeMap = std::array<float, 256>;

const CodeMap& dynamic_map_signed();
const CodeMap& dynamic_map_unsigned();

// The code of x (a value already divided by its block's absmax) in `map`, as bitsandbytes'
// blockwise optimizer kernels choose it: a binary search over the sorted codes, then the
// nearer of the two codes around x, a tie going to the code the search ended on. A NaN x
// (a block whose absmax is 0) gets code 0.
uint8_t quantize_code(const CodeMap& map, bool is_signed, float x);

}  // namespace fitgrad::quant
