// Checks fitgrad's GGUF decodes against ggml's `gguf` package (gguf-py) bit for bit: the
// value-by-value comparison and the whole-tensor checksum that
// tests/golden/gen_smollm2_fixture.py stores for every tensor of SmolLM2.
//
// Note [Bitwise GGUF decodes]
// The decodes must match exactly, not within an ulp. gguf-py computes in f32 as fitgrad
// does: it widens the f16 scale d (and Q4_1's min m) to f32, which is exact, and forms
// d * q (Q8_0) or d * q + m (Q4_1). d has at most 11 significant bits and q at most 8
// (Q8_0's q is an i8, Q4_1's a nibble 0..15), so d * q has at most 19 and is exact in f32,
// far from its overflow and underflow limits. A Q8_0 value therefore involves no rounding
// and a Q4_1 value exactly one, the correctly rounded sum: every IEEE f32 implementation
// gets the same bits, with or without an FMA (the product is exact either way).
// F32 tensors are copies. So any difference at all is a decoding bug.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <string>

namespace fitgrad::test {

// sum_i bits(x_i) * (2 i + 1) mod 2^64 as 16 hex digits, bits(x) being the f32 bit
// pattern: any changed, moved or swapped value changes it.
inline std::string decode_checksum(const float* x, int64_t n) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < n; ++i)
    sum += uint64_t(std::bit_cast<uint32_t>(x[i])) * (2 * uint64_t(i) + 1);
  return fmt::format("{:016x}", sum);
}

// Fails once, naming `what`, when the bits of any of the n values differ: how many differ,
// and the first of them with both values.
inline void expect_same_bits(const float* got, const float* want, int64_t n,
                             const std::string& what) {
  int64_t differ = 0, first = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want[i])) continue;
    if (differ++ == 0) first = i;
  }
  if (differ > 0)
    ADD_FAILURE() << what << ": " << differ << " of " << n
                  << " values differ in bits from gguf-py's; the first, value " << first << ": got "
                  << fmt::format("{:a}", got[first]) << ", gguf-py "
                  << fmt::format("{:a}", want[first]);
}

}  // namespace fitgrad::test
