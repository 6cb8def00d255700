// An IEEE binary16 (f16) reference for tests, independent of tensor/half.h: the compiler's
// _Float16 where it has one (GCC; __FLT16_MAX__ says so), else the value computed exactly in
// double from the sign, exponent and mantissa fields, and float -> f16 rounded to nearest
// even in double (see Note [f16 reference rounding]). Clang 14 has no _Float16 on x86-64.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace fitgrad::test {

// Note [f16 reference rounding]
// A finite |x| < 65520 lies in the binade of its leading bit L (at least -14, the subnormal
// binade), where f16 values are multiples of 2^(L-10). q = nearbyint(|x| / 2^(L-10)) rounds
// half to even (the default rounding mode; the division by a power of two is exact), and
// the bits are ((L + 15) << 10) + q - 1024: a q of 2048 carries into the next binade, and
// in the subnormal binade (L = -14) the formula reduces to q. |x| >= 65520, halfway from
// the largest finite value 65504 to 2^16, rounds to infinity.

inline double f16_decode_reference(uint16_t bits) {
#ifdef __FLT16_MAX__
  return double(std::bit_cast<_Float16>(bits));
#else
  const int exp = (bits >> 10) & 0x1F;
  const int mant = bits & 0x3FF;
  double v;
  if (exp == 0x1F)
    v = mant == 0 ? std::numeric_limits<double>::infinity()
                  : std::numeric_limits<double>::quiet_NaN();
  else if (exp == 0)
    v = std::ldexp(double(mant), -24);
  else
    v = std::ldexp(double(1024 + mant), exp - 25);
  return (bits >> 15) ? -v : v;
#endif
}

// NaN becomes a quiet NaN whose payload is unspecified.
inline uint16_t f16_encode_reference(float f) {
#ifdef __FLT16_MAX__
  return std::bit_cast<uint16_t>(_Float16(f));
#else
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isnan(f)) return sign | 0x7E00;
  const double a = std::fabs(double(f));
  if (a >= 65520.0) return sign | 0x7C00;
  int e = 0;
  std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1): the leading bit is 2^(e-1)
  const int lead = a == 0 ? -14 : std::max(e - 1, -14);
  const double q = std::nearbyint(a / std::ldexp(1.0, lead - 10));
  return uint16_t(sign | uint32_t(((lead + 15) << 10) + int(q) - 1024));
#endif
}

}  // namespace fitgrad::test
