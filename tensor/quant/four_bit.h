// bitsandbytes' 4-bit blockwise quantization (Dettmers et al. 2023, "QLoRA"), NF4 and FP4,
// as facts of its published semantics: a block of `blocksize` consecutive values (the last
// one partial) keeps its f32 absmax; each value times the block's f32 reciprocal 1 / absmax
// gets a 4-bit code; two codes share a byte, the first value in the high nibble; and the
// absmaxes can themselves be quantized (double quantization).
//
// Note [NF4 codes and thresholds]
// NF4's 16 values are the published list from -1 through 0 to 1 (normal-distribution
// quantiles, asymmetric so that 0 is exact). A value x takes the code of the nearest value:
// the thresholds are the midpoints between neighbouring codes, computed in fp64 from the f32
// codes and rounded to f32 (to nearest even), and x exactly on a threshold goes to the
// lower code, as the kernel tree's `x > t` does. bitsandbytes' CUDA kernel writes the same
// midpoints as 16-digit decimal literals; four of them (thresholds 0, 8, 12 and 14) lie
// exactly halfway between two f32 values, where the printed digits round to the other
// neighbour, so the compiled kernel's thresholds differ there by one ulp. Only an input
// exactly on one of those four values codes differently. FP4 is
// bitsandbytes' sign + 3-bit magnitude code (0, 0.0052, 0.1667, 0.25, 0.3333, 0.5, 0.6667, 1)
// with its kernel's thresholds. A NaN x (a block of zeros: 0 * 1/0) takes code 0.
//
// Note [Double quantization]
// With double quantization the absmaxes are stored as 8-bit codes: their mean (the f64 sum
// of the f32 absmaxes, rounded once; bitsandbytes takes torch's f32 mean) is subtracted,
// and the differences are quantized in blocks of 256 with the signed dynamic map
// (dynamic_map.h), each block with its own f32 absmax. An absmax is then map[q] * absmax2 +
// offset. That is 8 + 32/256 bits per block instead of 32: 4.127 bits per parameter at
// blocksize 64 instead of 4.5.
#pragma once

#include <array>
#include <cstdint>

#include "tensor/half.h"

namespace fitgrad::quant {

enum class FourBitType : uint8_t { nf4, fp4 };

const std::array<float, 16>& nf4_values();
const std::array<float, 15>& nf4_thresholds();
// The FP4 value of each code: the low 3 bits' magnitude, negated when bit 3 is set.
const std::array<float, 16>& fp4_values();
const std::array<float, 16>& four_bit_values(FourBitType type);

uint8_t nf4_code(float x);
uint8_t fp4_code(float x);

// Throws "[<what>] blocksize must be a power of two from 32 to 4096, got N" otherwise.
void check_four_bit_blocksize(int64_t blocksize, const char* what);

inline int64_t blocks_of(int64_t n, int64_t blocksize) { return (n + blocksize - 1) / blocksize; }

// Quantizes n values into (n + 1) / 2 packed bytes and blocks_of(n, blocksize) absmaxes.
template <class T>
void quantize_four_bit(const T* a, int64_t n, int64_t blocksize, FourBitType type, uint8_t* packed,
                       float* absmax);
// The inverse: n values of T (f32, bf16 or f16), each rounded once from the f32 product.
template <class T>
void dequantize_four_bit(const uint8_t* packed, const float* absmax, int64_t n, int64_t blocksize,
                         FourBitType type, T* out);

// Rows of a quantized (rows, row_len) tensor, as dequantize_four_bit gives them: for each
// of the n_ids row indices (i32 or i64, each in [0, rows), checked by the caller), its row_len values
// into out (n_ids, row_len).
template <class T, class Id>
void dequantize_four_bit_rows(const uint8_t* packed, const float* absmax, int64_t row_len,
                              int64_t blocksize, FourBitType type, const Id* ids, int64_t n_ids,
                              T* out);

// Double quantization of `blocks` absmaxes (Note [Double quantization]): blocks codes,
// blocks_of(blocks, 256) second-level absmaxes and the offset.
inline constexpr int64_t kNestedBlocksize = 256;
void quantize_absmax(const float* absmax, int64_t blocks, uint8_t* codes, float* absmax2,
                     float* offset);
void dequantize_absmax(const uint8_t* codes, const float* absmax2, float offset, int64_t blocks,
                       float* absmax);

}  // namespace fitgrad::quant
