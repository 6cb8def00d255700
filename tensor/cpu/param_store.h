// Writing an optimizer's updated f32 value back into a parameter element: rounded to
// nearest even in the parameter's dtype, or, for a bf16 parameter with stochastic rounding
// on, rounded up or down at random in proportion to the distance.
//
// Note [Stochastic rounding]
// A bf16 weight has 8 bits of mantissa: an update smaller than half its spacing (2^-9 of its
// size) is lost entirely under round-to-nearest, so pure bf16 training with no fp32 master
// copy stalls once the updates shrink. Stochastic rounding keeps them in expectation: add
// 16 random bits to the 16 bits that bf16 drops, then truncate, which rounds up with
// probability (dropped part) / 2^16, so E[round(x)] = x up to 2^-16 of an ulp. The bits are
// Philox draw offset + i for element i (backend::StochasticRounding), so a run is
// reproducible whatever the thread count, and resumable: the optimizer saves its offset. NaN
// and infinity round to nearest.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "tensor/backend/kernel_args.h"
#include "tensor/half.h"
#include "tensor/random/philox.h"

namespace fitgrad::cpu {

// x rounded to bf16 with the 16 random bits in the low half of `bits`.
inline BFloat16 bf16_stochastic(float x, uint32_t bits) {
  if (!std::isfinite(x)) return BFloat16(x);
  const uint32_t u = std::bit_cast<uint32_t>(x) + (bits & 0xFFFFu);
  return BFloat16::from_bits(uint16_t(u >> 16));
}

// Rounds values for elements of one parameter: round(i, x) is x in P for element i (counted
// from the parameter's first element). With stochastic rounding it draws the Philox block
// of four draws once per block as the index advances.
template <class P>
class ParamRounder {
 public:
  explicit ParamRounder(const backend::StochasticRounding& sr) : sr_(sr) {}

  static constexpr bool kCanRound = std::is_same_v<P, BFloat16>;
  bool stochastic() const { return kCanRound && sr_.enabled; }

  P round(int64_t i, float x) {
    if constexpr (kCanRound) {
      if (sr_.enabled) {
        const uint64_t draw = sr_.offset + uint64_t(i);
        if (draw / 4 != block_index_ || !have_block_) {
          block_ = philox_block(sr_.seed, draw / 4);
          block_index_ = draw / 4;
          have_block_ = true;
        }
        return bf16_stochastic(x, block_[draw % 4]);
      }
    }
    return P(x);
  }

 private:
  backend::StochasticRounding sr_;
  PhiloxCounter block_{};
  uint64_t block_index_ = 0;
  bool have_block_ = false;
};

}  // namespace fitgrad::cpu
