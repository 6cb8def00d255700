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
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace fitgrad::quant {

using CodeMap = std::array<float, 256>;

const CodeMap& dynamic_map_signed();
const CodeMap& dynamic_map_unsigned();

// Note [The code search]
// bitsandbytes' quantize_2D searches the 256 sorted codes from pivot 127 with steps 64, 32,
// ..., 1 and then compares x with the f32 midpoint (a + b) * 0.5 between the final pivot and
// its neighbour on x's side. Its final pivot is always even (127 plus six even steps and
// one odd), the neighbour is always adjacent, and the signed map's lower bound -1 and the
// upper bound 1 only matter beyond the end codes. So its answer is: with code[j] < x <=
// code[j + 1], the nearer of j and j + 1, and at exactly the midpoint the even one of the
// two. CodeSearch finds j without a search: the top 16 bits of x's float (sign, exponent and
// 7 mantissa bits) index a table of the codes below that bucket, and a bucket never holds
// more than two codes (the map's codes are at least 0.7% apart relatively; a bucket spans
// under 0.8%, checked when the table is built), so two compares finish it. An optimizer
// quantizes two values per parameter per step, and a binary search's unpredictable
// branches made that most of Adam8bit's time. tests/tensor/quant/dynamic_map_test.cpp
// checks it against the literal search on every code, every midpoint, their neighbouring
// floats and a million random values.
class CodeSearch {
 public:
  explicit CodeSearch(const CodeMap& map);
  // The code of x (a value already divided by its block's absmax); a NaN x (a block whose
  // absmax is 0) gets code 0.
  uint8_t code(float x) const;

 private:
  std::array<float, 259> codes_;  // -inf, the map, then two +inf
  std::vector<uint8_t> base_;     // 65,536 buckets: the codes below each
};

inline uint8_t CodeSearch::code(float x) const {
  if (!(x <= 1.0f)) return x > 1.0f ? 255 : 0;  // above every code, or NaN
  // p = the number of codes below x: those below x's bucket, plus at most two inside it.
  // codes_[k + 1] is code k, so codes_[p] is the code below x (-inf when there is none).
  const int base = base_[std::bit_cast<uint32_t>(x) >> 16];
  const int p =
      base + int(codes_[std::size_t(base) + 1] < x) + int(codes_[std::size_t(base) + 2] < x);
  const float lo = codes_[std::size_t(p)], hi = codes_[std::size_t(p) + 1];
  const float mid = (hi + lo) * 0.5f;
  // The nearer of codes p - 1 and p; a tie goes to the even one, where bitsandbytes' search
  // ends. Branch-free: which side of the midpoint x falls on is a coin toss.
  return uint8_t(p - 1 + int(x > mid) + int(x == mid) * int((p & 1) == 0));
}

const CodeSearch& signed_search();
const CodeSearch& unsigned_search();

}  // namespace fitgrad::quant
