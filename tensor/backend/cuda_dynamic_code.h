// The 8-bit dynamic-map code search as the CUDA kernels run it, in plain constexpr C++: the
// Adam8bit kernel (cuda/kernels/optim.cu) codes its states with it and the 4-bit kernels
// (cuda/kernels/four_bit.cu) the nested absmaxes of double quantization. One definition for
// both (their two launch headers once had one each, an ODR violation), checked against
// tensor/quant/dynamic_map.h's CodeSearch on every code, midpoint and neighbour by
// tests/tensor/backend/cuda_optim_launch_test.cpp and cuda_four_bit_launch_test.cpp.
//
// Note [The code search on the device]
// The code of x (a state or an absmax divided by its block's scale) in a sorted map of 256
// codes, by tensor/quant/dynamic_map.h's rule (Note [The code search]): above 1 is 255, NaN
// is 0; otherwise with p the number of codes below x, the nearer of codes p - 1 and p, the
// even one at exactly their f32 midpoint (code[p] + code[p - 1]) * 0.5, and 0 when no code
// is below x. CodeSearch finds p through its bucket table (64 KiB, too big for shared
// memory); here p comes from a branch-free binary search of the map in shared memory. The
// arithmetic is one sum and one halving, which no compiler fuses, so host and device agree.
#pragma once

#include <cstdint>

namespace fitgrad::backend {

inline constexpr int kDynamicMapCodes = 256;

// codes: the map's kDynamicMapCodes values, ascending, the last one 1.
constexpr uint8_t cuda_dynamic_code(const float* codes, float x) {
  if (!(x <= 1.0f)) return x > 1.0f ? 255 : 0;
  int p = 0;  // codes[0, p) are below x; codes[255] = 1 is not, so p stays <= 255
  for (int step = kDynamicMapCodes / 2; step > 0; step /= 2)
    if (codes[p + step - 1] < x) p += step;
  if (p == 0) return 0;
  const float mid = (codes[p] + codes[p - 1]) * 0.5f;
  return uint8_t(p - 1 + int(x > mid) + int(x == mid) * int((p & 1) == 0));
}

}  // namespace fitgrad::backend
