// The fp32 CPU GEMM that matmul, linear and bmm call (issue 3). Plain pointers and leading
// dimensions, row-major, BLAS semantics: C = alpha * op(A) @ op(B) + beta * C. The op
// front-ends in tensor/ own shapes and strides and hand this kernel only what it needs.
//
// Four backends sit behind one entry point: Eigen (always built), OpenBLAS (when CMake found
// it, FITGRAD_HAVE_OPENBLAS), oneDNN's matmul (FITGRAD_HAVE_DNNL) and oneMKL's sgemm (loaded
// at run time when present, mkl_blas.h). Which one runs by default, and why, is in Note [GEMM
// backend] and Note [GEMM backend per machine] in gemm.cpp. Results are bitwise reproducible run to run for a fixed
// thread count (DESIGN.md, Numerics).
#pragma once

#include <cstdint>
#include <string>

namespace fitgrad::cpu {

enum class GemmBackend { eigen, openblas, dnnl, mkl };

// Row-major C(m,n) = alpha * op(A)(m,k) @ op(B)(k,n) + beta * C, op(X) = X^T when the flag is
// set. A is stored (m,k) with row stride lda, or (k,m) when trans_a; B is (k,n), or (n,k)
// when trans_b; C is (m,n) with row stride ldc. beta == 0 overwrites C (NaNs in C do not
// survive); alpha == 0 or k == 0 never reads A or B. Throws fitgrad::Error "[gemm] ..." on a
// negative size, a leading dimension narrower than its row, or a null pointer that would be
// read or written.
void gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const float* a, int64_t lda,         // (m,k) or (k,m)
              const float* b, int64_t ldb,         // (k,n) or (n,k)
              float beta, float* c, int64_t ldc);  // (m,n)

// `batch` independent products; matrix i starts at a + i*stride_a (likewise b, c). A batch
// stride of 0 for A or B broadcasts one matrix over the batch; C's matrices must not
// overlap (stride_c >= (m-1)*ldc + n).
void gemm_f32_batched(bool trans_a, bool trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
                      float alpha, const float* a, int64_t lda, int64_t stride_a,  // (batch,...)
                      const float* b, int64_t ldb, int64_t stride_b,               // (batch,...)
                      float beta, float* c, int64_t ldc, int64_t stride_c);        // (batch,m,n)

// Note [TF32 on the CPU]
// TF32 is a matmul math mode, not a dtype (DESIGN.md, Numerics): tensor cores read fp32
// operands rounded to 10 explicit mantissa bits (8 exponent bits, as fp32) and accumulate in
// fp32. With the mode on (backend state, tensor/backend/math_mode.h, process-wide; `fitgrad
// train --tf32` turns it on for its run), the matmul and linear ops emulate exactly that:
// they run the staged GEMM (gemm_staged.h), which rounds each block of A and B to the
// nearest TF32 value (ties to even; infinities and NaNs pass through) in its workspace, which
// the front-end allocates like any other (Note [Native products] in tensor/ops/matmul.cpp),
// and multiplies the rounded blocks in fp32. So TF32 numerics can be tested and trained with
// anywhere, and the ledger sees the bytes. gemm_f32 itself is always plain fp32, and so are
// the products inside other kernels (naive attention), as flash attention's tiles are.
// x rounded to the nearest TF32 value, returned as an fp32.
float round_to_tf32(float x);

// The backend gemm_f32 uses: FITGRAD_GEMM's, else this machine's default (Note [GEMM backend
// per machine]), chosen at the first question, which throws an Error naming FITGRAD_GEMM for
// an unknown or unavailable name. set_gemm_backend exists for tests and benchmarks and throws
// when the backend is not available.
GemmBackend gemm_backend();
void set_gemm_backend(GemmBackend backend);
bool gemm_backend_available(GemmBackend backend);
const char* gemm_backend_name(GemmBackend backend);
// The backend in force, its library and why it was chosen, for the line commands print:
// "mkl (oneMKL 2026.2 (/path/libmkl_rt.so.3), this machine's default)".
std::string gemm_description();

// Threads a single GEMM uses (every backend). The default is the process's one thread
// budget, OpenMP's omp_get_max_threads() (OMP_NUM_THREADS, else every core; Note [One thread
// budget] in gemm.cpp). Results are reproducible for a fixed count; they may differ between
// counts.
int gemm_threads();
void set_gemm_threads(int threads);

}  // namespace fitgrad::cpu
