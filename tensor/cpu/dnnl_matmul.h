// oneDNN's matmul as the CPU backend uses it (Debian's libdnnl 2.6, when the build found it:
// FITGRAD_HAVE_DNNL): one row-major product with optional transposes given by leading
// dimensions, bias, alpha and beta, in f32 or bf16. The bf16 GEMM (gemm_bf16.h) and the
// fp32 GEMM's dnnl backend (Note [GEMM backend] in gemm.cpp) both run through it.
#pragma once

#include <cstdint>
#include <string>

#include "tensor/dtype.h"

namespace fitgrad::cpu {

// True when this build links oneDNN.
bool dnnl_available();

// "oneDNN 2.6.3": the version of the library this process loaded.
std::string dnnl_description();

// True when oneDNN has a bf16 matmul on this CPU at the ISA level in force, decided once
// (Note [oneDNN's bf16 matmul needs AVX-512] in dnnl_matmul.cpp).
bool dnnl_bf16_matmul_available();

// True when that bf16 matmul runs on AMX tiles (oneDNN's implementation name says "amx").
bool dnnl_bf16_matmul_on_amx();

// c (m, n) = alpha * op(a) op(b) (+ bias (n) on every row when bias is non-null) + beta * c,
// with op(a) (m, k) stored as (m, k) or, transposed, (k, m) at row stride lda, op(b) (k, n)
// as (k, n) or (n, k). a, b and bias have dtype `in` (f32 or bf16), c has `out`. beta == 0
// never reads c. Runs on `threads` OpenMP threads. m, n, k > 0. Throws without oneDNN, and
// an Error naming the dtypes, shapes and oneDNN's reason when oneDNN fails.
void dnnl_matmul(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, DType in,
                 const void* a, int64_t lda, const void* b, int64_t ldb, const void* bias,
                 float alpha, float beta, DType out, void* c, int64_t ldc, int threads);

}  // namespace fitgrad::cpu
