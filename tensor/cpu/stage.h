// Staging low-precision operands for kernels that compute on f32 rows (the attention
// kernels; Note [Staged attention tiles] in attention_flash.cpp). For E = float every helper
// is the identity on the caller's own memory; for bf16/f16 it converts through a buffer in
// the kernel's workspace, which the caller lays out (bf16 with the vector kernels of
// bf16_rows.h, the same values as convert()).
#pragma once

#include <cstdint>
#include <type_traits>

#include "tensor/convert.h"
#include "tensor/cpu/bf16_rows.h"

namespace fitgrad::cpu {

// True when E needs f32 staging.
template <class E>
constexpr bool kStaged = !std::is_same_v<E, float>;

// The n contiguous elements at src as f32: src itself for f32, else converted into buf.
template <class E>
const float* as_f32(const E* src, int64_t n, float* buf) {
  if constexpr (std::is_same_v<E, BFloat16>) {
    widen_bf16(src, n, buf);
    return buf;
  } else if constexpr (kStaged<E>) {
    for (int64_t i = 0; i < n; ++i) buf[i] = convert<float>(src[i]);
    return buf;
  } else {
    (void)n;
    (void)buf;
    return src;
  }
}

// Where the f32 accumulator for the output elements at dst lives: dst itself for f32, else
// buf, which store_rows then rounds into dst.
template <class E>
float* accumulator(E* dst, float* buf) {
  if constexpr (kStaged<E>) {
    (void)dst;
    return buf;
  } else {
    (void)buf;
    return dst;
  }
}

// Rounds the n accumulated elements into dst (nothing to do for f32: acc is dst).
template <class E>
void store_rows(const float* acc, int64_t n, E* dst) {
  if constexpr (std::is_same_v<E, BFloat16>)
    round_to_bf16(acc, n, dst);
  else if constexpr (kStaged<E>)
    for (int64_t i = 0; i < n; ++i) dst[i] = convert<E>(acc[i]);
}

}  // namespace fitgrad::cpu
