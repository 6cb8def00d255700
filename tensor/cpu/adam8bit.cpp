// Adam8bit's CPU kernel (see adam8bit.h).
//
// Note [Adam8bit kernel]
// The arithmetic is bitsandbytes' CUDA kernel kOptimizerStatic8bit2StateBlockwise, element
// for element and in its order, in f32 with one rounding per operation (this file is built
// with -ffp-contract=off, so no multiply-add is fused): for each element of a block of 256,
//   s2 = map2[state2] * absmax2;  s2 = s2 * beta2 + ((1 - beta2) * g) * g
//   s1 = map1[state1] * absmax1;  s1 = s1 * beta1 + (1 - beta1) * g
// then the block's new absmaxes are max |s1| and max |s2| over its elements, and
//   p = p + step_size * (s1 / (sqrt(s2) + eps * c2));  p = p * decay  (weight decay > 0)
//   state1 = code of s1 / absmax1 in the signed map, moved one code towards s1's sign if
//            the chosen code has the other sign; state2 = code of s2 / absmax2, unsigned.
// A block of zeros has absmax 0: its values divide to NaN, which codes as 0 (then 255 for
// state1 after the sign correction), and dequantize to 0 again. Blocks are independent, so
// threads take whole blocks and the result does not depend on their number. The 32-bit
// kernel (f32 states) does s1 = s1 * beta1 + (1 - beta1) * g, s2 = s2 * beta2 + (1 - beta2)
// * (g * g) and the same parameter update. tests/golden/gen_adam8bit_golden.py is the
// independent NumPy reference; its codes and absmaxes are matched byte for byte.
// bitsandbytes' CUDA kernel leaves a non-finite gradient element's parameter alone and
// zeroes its state; fitgrad's optimizer skips the whole parameter instead (optim/adam8bit.h),
// so this kernel never sees one.
#include "tensor/cpu/adam8bit.h"

#include <algorithm>
#include <cmath>

#include "tensor/convert.h"
#include "tensor/cpu/param_store.h"
#include "tensor/quant/dynamic_map.h"

namespace fitgrad::cpu {
namespace {

using backend::Adam8bitScalars;

template <class P, class G>
void blockwise(const Adam8bitScalars& k, P* p, const G* g, uint8_t* c1, uint8_t* c2, float* absmax1,
               float* absmax2, int64_t n, const backend::StochasticRounding& sr) {
  const quant::CodeMap& map1 = quant::dynamic_map_signed();
  const quant::CodeMap& map2 = quant::dynamic_map_unsigned();
  const quant::CodeSearch& search1 = quant::signed_search();
  const quant::CodeSearch& search2 = quant::unsigned_search();
  const int64_t blocks = (n + kAdam8bitBlock - 1) / kAdam8bitBlock;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * kAdam8bitBlock, len = std::min(kAdam8bitBlock, n - begin);
    float s1[kAdam8bitBlock], s2[kAdam8bitBlock];
    const float old1 = absmax1[b], old2 = absmax2[b];
    float max1 = 0.0f, max2 = 0.0f;
    for (int64_t j = 0; j < len; ++j) {
      const int64_t i = begin + j;
      const float gi = float(g[i]);
      float v2 = map2[c2[i]] * old2;
      v2 = v2 * k.beta2 + (k.one_minus_beta2 * gi) * gi;
      float v1 = map1[c1[i]] * old1;
      v1 = v1 * k.beta1 + k.one_minus_beta1 * gi;
      s1[j] = v1;
      s2[j] = v2;
      max1 = std::max(max1, std::fabs(v1));  // the states are finite (Note [Non-finite
      max2 = std::max(max2, std::fabs(v2));  // gradients in Adam8bit])
    }
    ParamRounder<P> out(sr);
    for (int64_t j = 0; j < len; ++j) {
      const int64_t i = begin + j;
      const float stepped = float(p[i]) + k.step_size * (s1[j] / (std::sqrt(s2[j]) + k.eps_c2));
      if (k.weight_decay) {
        // The kernel rounds to the parameter's dtype after the step and again after decay.
        p[i] = out.round(i, float(P(stepped)) * k.decay);
      } else {
        p[i] = out.round(i, stepped);
      }
    }
    for (int64_t j = 0; j < len; ++j) {
      const int64_t i = begin + j;
      // One code towards s1's sign when the nearest has the other one (branch-free).
      const uint8_t code = search1.code(s1[j] / max1);
      const int fix = int(std::signbit(map1[code]) != std::signbit(s1[j]));
      c1[i] = uint8_t(code + fix * (2 * int(s1[j] > 0.0f) - 1));
      c2[i] = search2.code(s2[j] / max2);
    }
    absmax1[b] = max1;
    absmax2[b] = max2;
  }
}

template <class P, class G>
void full_precision(const Adam8bitScalars& k, P* p, const G* g, float* m, float* v, int64_t n,
                    const backend::StochasticRounding& sr) {
  ParamRounder<P> out(sr);
  for (int64_t i = 0; i < n; ++i) {
    const float gi = float(g[i]);
    m[i] = m[i] * k.beta1 + k.one_minus_beta1 * gi;
    v[i] = v[i] * k.beta2 + k.one_minus_beta2 * (gi * gi);
    const float stepped = float(p[i]) + k.step_size * (m[i] / (std::sqrt(v[i]) + k.eps_c2));
    p[i] = out.round(i, k.weight_decay ? float(P(stepped)) * k.decay : stepped);
  }
}

}  // namespace

void adam8bit_update(const backend::Adam8bitArgs& a) {
  const int64_t n = a.param.numel();
  dispatch_floating(a.param.dtype(), "adam8bit_update", [&](auto p_tag) {
    dispatch_floating(a.grad.dtype(), "adam8bit_update", [&](auto g_tag) {
      auto* p = a.param.data<decltype(p_tag)>();
      const auto* g = a.grad.data<decltype(g_tag)>();
      if (a.state1.dtype() == DType::u8)
        blockwise(a.k, p, g, a.state1.data<uint8_t>(), a.state2.data<uint8_t>(),
                  a.absmax1.data<float>(), a.absmax2.data<float>(), n, a.sr);
      else
        full_precision(a.k, p, g, a.state1.data<float>(), a.state2.data<float>(), n, a.sr);
    });
  });
}

}  // namespace fitgrad::cpu
