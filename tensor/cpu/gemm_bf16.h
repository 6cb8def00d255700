// The CPU bf16 GEMM: bf16 operands read as they are, products accumulated in f32, and the
// result written as f32 or bf16 (Note [bf16 GEMM] in gemm_bf16.cpp). Row-major, like
// gemm_f32 (tensor/cpu/gemm.h), with optional transposes given by leading dimensions.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"
#include "tensor/half.h"

namespace fitgrad::cpu {

// True when this build has a bf16 GEMM (oneDNN) and this CPU runs it (AVX-512, at the ISA
// level in force); without one the front-ends stage bf16 products through the fp32 GEMM.
bool gemm_bf16_available();

// True when the front-ends should use that GEMM for bf16 products rather than stage them
// through the fp32 GEMM: available, and faster here by the rule of Note [When oneDNN's bf16
// matmul pays] in gemm_bf16.cpp. Decided once; the CPU backend's table (bf16_gemm) follows it.
bool gemm_bf16_preferred();

// c (m, n) = op(a) op(b) (+ bias (n) on every row when bias is non-null), with op(a) (m, k)
// stored as (m, k) or, transposed, (k, m), and op(b) (k, n) stored as (k, n) or (n, k).
// c_dtype is f32 or bf16; bias is bf16. Throws when no bf16 GEMM is available.
void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const BFloat16* a,
               int64_t lda,                     // (m,k) or (k,m)
               const BFloat16* b, int64_t ldb,  // (k,n) or (n,k)
               const BFloat16* bias,            // (n) or null
               void* c, DType c_dtype, int64_t ldc);

}  // namespace fitgrad::cpu
