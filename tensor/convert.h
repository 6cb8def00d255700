// Element conversion between the seven storage types (float, Half, BFloat16, int32_t,
// int64_t, uint8_t, int8_t) and the host types that from_vector/to_vector accept (double
// and the other standard arithmetic types). Every conversion is a single correct rounding
// or a documented saturation/wrap, so copies between dtypes agree bit for bit on every
// backend that follows these rules. See Note [Integer to half rounding] and
// Note [Float to integer saturation].
#pragma once

#include <bit>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "tensor/dtype.h"
#include "tensor/error.h"
#include "tensor/half.h"

namespace fitgrad {

template <class T>
concept HalfLike = std::same_as<T, Half> || std::same_as<T, BFloat16>;

template <class T>
concept Element = HalfLike<T> ||
    (std::is_arithmetic_v<T> && !std::same_as<T, bool> && !std::same_as<T, long double>);

// Note [Integer to half rounding]
// f16 and bf16 have 11 and 8 significant bits. Converting an integer (or a double) first
// to float with round-to-nearest and then to half rounds twice, and the second rounding
// can land on the wrong side: 2^24 + 2^16 + 1 rounds to the float 2^24 + 2^16, an exact
// bf16 tie, which then goes to even, 2^24, though the integer lies above the midpoint and
// the correct bf16 is 2^24 + 2^17. Rounding to odd in the first step fixes this: truncate
// toward zero and, if any bit was dropped, set the lowest kept bit. The result then
// remembers "inexact" in a bit the final rounding looks at, and since float keeps at
// least two more bits than either half format, the final round-to-nearest-even gives the
// correctly rounded half. Integers are rounded to odd in integer arithmetic (exact for
// every width, i64 included); doubles by correcting the float that the hardware rounded
// to nearest.

// |x| * (negative ? -1 : 1) as a float rounded to odd at 24 significant bits.
inline float round_to_odd_float(uint64_t magnitude, bool negative) {
  int shift = 0;
  if (magnitude >> 24) {
    shift = 64 - std::countl_zero(magnitude) - 24;
    const bool inexact = (magnitude & ((uint64_t(1) << shift) - 1)) != 0;
    magnitude = (magnitude >> shift) | uint64_t(inexact);
  }
  const float f = std::ldexp(float(magnitude), shift);  // exact: magnitude < 2^24
  return negative ? -f : f;
}

inline float round_to_odd_float(double d) {
  float f = float(d);
  if (std::isnan(d) || double(f) == d) return f;
  if (std::fabs(double(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);  // now truncated
  return std::bit_cast<float>(std::bit_cast<uint32_t>(f) | 1u);
}

template <std::integral I>
float round_to_odd_float(I x) {
  if constexpr (std::is_signed_v<I>) {
    const uint64_t magnitude = x < 0 ? uint64_t(0) - uint64_t(int64_t(x)) : uint64_t(x);
    return round_to_odd_float(magnitude, x < 0);
  } else {
    return round_to_odd_float(uint64_t(x), false);
  }
}

// Note [Float to integer saturation]
// C++ leaves float -> integer undefined when the value does not fit, and hardware
// answers differ (x86 gives INT_MIN). fitgrad defines it: truncate toward zero, NaN
// becomes 0, and values beyond the range saturate to its minimum or maximum (so +inf ->
// max, -inf -> min). Integer -> integer conversions wrap modulo 2^bits, as C++20 defines
// them and as PyTorch and NumPy do.
template <std::integral I>
I saturate_to(double x) {
  using L = std::numeric_limits<I>;
  if (std::isnan(x)) return 0;
  // Both bounds are powers of two (or 0) away from exact, so the comparisons are exact:
  // max + 1 is 2^bits', and everything below it truncates into range.
  const double upper = std::ldexp(1.0, L::digits);  // max + 1
  if (x >= upper) return L::max();
  if (x <= double(L::min())) return L::min();
  return static_cast<I>(x);
}

// Converts one element. `To` and `From` are storage types or host arithmetic types.
template <Element To, Element From>
To convert(From x) {
  if constexpr (std::same_as<To, From>) {
    return x;
  } else if constexpr (HalfLike<From>) {
    return convert<To>(static_cast<float>(x));  // exact widening
  } else if constexpr (HalfLike<To>) {
    if constexpr (std::same_as<From, float>)
      return To(x);
    else
      return To(round_to_odd_float(x));  // see Note [Integer to half rounding]
  } else if constexpr (std::is_floating_point_v<To>) {
    return static_cast<To>(x);  // a single round to nearest even, or exact
  } else if constexpr (std::is_floating_point_v<From>) {
    return saturate_to<To>(double(x));  // see Note [Float to integer saturation]
  } else {
    return static_cast<To>(x);  // integer -> integer wraps
  }
}

// Calls fn(T{}) with T the storage type (float, Half, BFloat16) of a floating dtype; `what`
// names the caller in the internal error for any other dtype.
template <class Fn>
void dispatch_floating(DType t, const char* what, Fn&& fn) {
  switch (t) {
    case DType::f32: return fn(float{});
    case DType::f16: return fn(Half{});
    case DType::bf16: return fn(BFloat16{});
    default: FG_ASSERT(false, "{} on {} data", what, dtype_name(t));
  }
}

}  // namespace fitgrad
