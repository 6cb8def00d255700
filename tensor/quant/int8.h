// Q-GaLore's int8 weights (Zhang et al. 2024, "Q-GaLore"; its q_galore_torch/utils/
// quantization.py and the weight update of q_galore_adamw8bit.py), as facts of the published
// semantics: the weight, flattened in its stored (row-major) order, is cut into groups of
// `group_size` consecutive values (256 by default; the size must divide the count), and each
// group is quantized asymmetrically to 8-bit unsigned codes with its own scale and zero point:
//
//   scale = max(max(w) - min(w), 1e-5) / 255
//   zero  = clamp(-round(min(w) / scale), 0, 255)
//   code  = clamp(round(w / scale) + zero, 0, 255)            (round to nearest even)
//   value = (code - zero) * scale
//
// Note [Int8 weights]
// Facts followed from the reference: asymmetric (a zero point per group, not a signed
// symmetric code), groups over the flattened weight, scale and zero recomputed from the new
// values at every update (never carried over), and the update's re-quantization rounded
// stochastically: r = w / scale takes ceil(r) when a uniform u in [0, 1) is below
// r - floor(r), else floor(r), then zero is added and the code clamped (torch.where(rand <
// p, ceil, floor)), so E[code] = r + zero away from the clamp. The initial quantization of a
// weight rounds to nearest, as the reference's _quantize_tensor_int8 does. Also kept: the
// zero's clamp to [0, 255], so a group that does not straddle 0 (its minimum half a step or
// more above 0, or its maximum below) clamps the codes of its far end (the golden data's
// edge cases); a trained weight's groups straddle 0.
// Where fitgrad differs, on purpose: the reference computes in the weight's dtype (bf16 in
// its runs) and keeps scale and zero as bf16 tensors; here every step is one f32 operation,
// the scale is kept in f32 and the zero (an integer in [0, 255]) in u8, 5 bytes per group
// (0.02 bytes per weight at 256). The uniform of element i is Philox draw offset + i
// (uniform_from_bits: its top 24 bits times 2^-24, Note [Philox streams]), so the CPU and
// CUDA kernels round alike and a resumed run draws what the uninterrupted one would. Values
// are read as f32; a NaN is skipped by min and max (the reference asserts there is none).
#pragma once

#include <math.h>

#include <cstdint>

#if defined(__CUDACC__)
#define FG_INT8_HD __host__ __device__ __forceinline__
#else
#define FG_INT8_HD inline
#endif

namespace fitgrad::quant {

inline constexpr float kInt8MaxCode = 255.0f;
inline constexpr float kInt8MinRange = 1e-5f;  // the reference's clamp of max - min
inline constexpr int64_t kInt8DefaultGroupSize = 256;

// A group's scale from its min and max.
FG_INT8_HD float int8_scale(float lo, float hi) {
  return fmaxf(hi - lo, kInt8MinRange) / kInt8MaxCode;
}
// A group's zero point (an integer in [0, 255], as a float) from its min and scale.
FG_INT8_HD float int8_zero(float lo, float scale) {
  return fminf(fmaxf(-rintf(lo / scale), 0.0f), kInt8MaxCode);
}
// The code of w rounded to nearest (even).
FG_INT8_HD uint8_t int8_code_nearest(float w, float scale, float zero) {
  return uint8_t(fminf(fmaxf(rintf(w / scale) + zero, 0.0f), kInt8MaxCode));
}
// The code of w rounded stochastically with the uniform u in [0, 1).
FG_INT8_HD uint8_t int8_code_stochastic(float w, float scale, float zero, float u) {
  const float r = w / scale;
  const float down = floorf(r);
  const float q = u < r - down ? ceilf(r) : down;
  return uint8_t(fminf(fmaxf(q + zero, 0.0f), kInt8MaxCode));
}
// The value of a code.
FG_INT8_HD float int8_value(uint8_t code, uint8_t zero, float scale) {
  return (float(code) - float(zero)) * scale;
}

// Throws "[<what>] --weight_group_size <g> ..." unless g >= 1 divides n.
void check_int8_group_size(int64_t n, int64_t group_size, const char* what);

// Quantizes a (n) into codes (n), scales and zeros (n / group_size): to nearest when
// `stochastic` is false, else with the uniform of Philox draw offset + i for element i.
template <class E>
void quantize_int8(const E* a, int64_t n, int64_t group_size, uint8_t* codes, float* scales,
                   uint8_t* zeros, bool stochastic, uint64_t seed, uint64_t offset);
// out (n) = the values of codes (n) with scales and zeros (n / group_size).
template <class E>
void dequantize_int8(const uint8_t* codes, const float* scales, const uint8_t* zeros, int64_t n,
                     int64_t group_size, E* out);

}  // namespace fitgrad::quant
