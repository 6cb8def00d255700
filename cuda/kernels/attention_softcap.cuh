// Soft-capped scores inside the cuda flash kernels (attention_flash.cu,
// attention_flash_backward.cu, attention_flash_simt.cu), as the CPU's (Note [Soft-capped scores] in
// tensor/cpu/attention_flash.cpp): the scaled score x becomes cap tanh(x / cap) before the
// mask and the softmax, and the backward, which recomputes the capped score to get the
// probability, multiplies dS by the slope 1 - (capped / cap)^2. The tensor-core kernels keep
// scores in base 2 (x log2 e); there the cap is cap log2 e, since cap tanh(x / cap) log2 e =
// (cap log2 e) tanh(x log2 e / (cap log2 e)). A cap of 0 is none.
#pragma once

namespace fitgrad::cuda {

// The capped score, in the units of x and cap.
__device__ __forceinline__ float soft_capped(float x, float cap) {
  return cap > 0.0f ? cap * tanhf(x / cap) : x;
}

// d capped / d x at a capped score.
__device__ __forceinline__ float soft_cap_slope(float capped, float cap) {
  if (cap <= 0.0f) return 1.0f;
  const float r = capped / cap;
  return 1.0f - r * r;
}

}  // namespace fitgrad::cuda
