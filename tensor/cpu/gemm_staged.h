// The GEMM for f16 operands, for bf16 ones where no bf16 GEMM is built
// (gemm_bf16_available() false), and for f32 ones in TF32 mode (Note [TF32 on the CPU] in
// gemm.h): the product runs block by block on the fp32 GEMM, each block's operands widened
// (and, for TF32, rounded) into a bounded f32 workspace and its result accumulated there in
// f32 and rounded once into c (Note [Staged GEMM blocks] in gemm_staged.cpp). Row-major
// with optional transposes, like gemm_f32 (tensor/cpu/gemm.h).
#pragma once

#include <cstdint>

#include "tensor/half.h"

namespace fitgrad::cpu {

// f32 elements of gemm_staged's workspace for an (m, k) @ (k, n) product: one block of each
// operand and of the result, never more than a fixed bound whatever the sizes.
int64_t gemm_staged_workspace_floats(int64_t m, int64_t n, int64_t k);

// c (m, n) = op(a) op(b) (+ bias (n) on every row when bias is non-null), op(a) (m, k)
// stored as (m, k) or, transposed, (k, m), op(b) (k, n) stored as (k, n) or (n, k). E is
// Half, BFloat16 or float; with round_tf32 every operand element is rounded to TF32 as it
// is widened (the bias is not: it is added in fp32, as a tensor-core epilogue does).
// workspace holds gemm_staged_workspace_floats(m, n, k) floats.
template <class E>
void gemm_staged(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const E* a,
                 int64_t lda,              // (m,k) or (k,m)
                 const E* b, int64_t ldb,  // (k,n) or (n,k)
                 const E* bias,            // (n) or null
                 E* c, int64_t ldc,        // (m,n)
                 bool round_tf32, float* workspace);

}  // namespace fitgrad::cpu
