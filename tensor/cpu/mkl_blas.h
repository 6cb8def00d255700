// Intel oneMKL's GEMMs as the CPU backend uses them, loaded at run time (Note [oneMKL at run
// time] in mkl_blas.cpp): nothing of oneMKL is needed to build fitgrad, and a binary runs the
// same without it. tools/install-deps.sh puts PyPI's `mkl` wheel in the checkout's .deps/mkl/
// (a project-owned prefix, Intel Simplified Software License, docs/dependencies.md), which a
// build looks in first; FITGRAD_MKL names another libmkl_rt or its folder. The fp32 GEMM's
// mkl backend (Note [GEMM backend] in gemm.cpp) runs through it.
#pragma once

#include <cstdint>
#include <string>

namespace fitgrad::cpu {

// True when oneMKL was found and loaded (tried once, at the first question).
bool mkl_available();

// "oneMKL 2026.2 (/path/libmkl_rt.so.3)" when loaded; why it is not otherwise ("no libmkl_rt
// in ..."), for the line that says which GEMM runs.
std::string mkl_description();

// Row-major C(m,n) = alpha * op(A) @ op(B) + beta * C, as gemm_f32 (gemm.h), on `threads`
// OpenMP threads. Arguments are checked by the caller; sizes fit a 32-bit MKL_INT (LP64).
// Throws when oneMKL is not loaded.
void mkl_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const float* a, int64_t lda,        // (m,k) or (k,m)
               const float* b, int64_t ldb,        // (k,n) or (n,k)
               float beta, float* c, int64_t ldc,  // (m,n)
               int threads);

}  // namespace fitgrad::cpu
