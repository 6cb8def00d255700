// The bf16 product of one row against a weight stored (n, k) row-major: the decode step of
// generation (one token), where every weight byte is read once and the product is bound by
// memory bandwidth (Note [bf16 GEMV] in gemv_bf16.cpp).
#pragma once

#include <cstdint>

#include "tensor/dtype.h"
#include "tensor/half.h"

namespace fitgrad::cpu {

// True where gemv_bf16 runs: the ISA level in force has the AVX512-BF16 dot products
// (avx512_bf16 or amx) and the build targets x86-64 with GCC or Clang.
bool gemv_bf16_available();

// c (1, n) = a (1, k) b^T (+ bias (n) when non-null), with b stored (n, k) with leading
// dimension ldb; products and sums in f32 (the dot-product instructions flush denormals, as
// oneDNN's bf16 kernels do), c written as f32 or bf16 (rounded once). Each output is summed by
// one thread in a fixed order, so the result does not depend on the thread count. Throws
// where !gemv_bf16_available().
void gemv_bf16(int64_t n, int64_t k, const BFloat16* a, const BFloat16* b, int64_t ldb,
               const BFloat16* bias, void* c, DType c_dtype);

}  // namespace fitgrad::cpu
