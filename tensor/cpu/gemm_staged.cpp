// The staged low-precision GEMM (see gemm_staged.h).
//
// Note [Staged GEMM blocks]
// The result is cut into blocks of up to kBlockM x kBlockN and the shared dimension into
// panels of up to kBlockK. For each result block, every k panel widens its slice of A
// (kBlockM x kBlockK) and of B (kBlockK x kBlockN) into f32 and adds their product into the
// block's f32 accumulator (seeded with the bias, or zero) with gemm_f32; the block is then
// rounded into c once. So the workspace is at most 256 x 512 + 512 x 1024 + 256 x 1024
// floats (3.5 MiB) for any product, and the rounding is that of one f32 result per element,
// as in the f32 GEMM on widened operands except for how the k sum is split into panels.
// A is widened ceil(n / kBlockN) times and B ceil(m / kBlockM) times; against the
// 2 m n k flops that is under 1% of the work for any product worth a GEMM. Slices are
// widened in their stored layout (a transposed operand stays transposed for gemm_f32).
#include "tensor/cpu/gemm_staged.h"

#include <algorithm>

#include "tensor/convert.h"
#include "tensor/cpu/gemm.h"

namespace fitgrad::cpu {
namespace {

constexpr int64_t kBlockM = 256, kBlockN = 1024, kBlockK = 512;

// dst (rows, cols), row stride cols, = src's rows x cols at row stride ld, widened and, with
// tf32, rounded to TF32.
template <class E>
void widen(const E* src, int64_t ld, int64_t rows, int64_t cols, bool tf32, float* dst) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) {
      const float x = convert<float>(src[r * ld + j]);
      dst[r * cols + j] = tf32 ? round_to_tf32(x) : x;
    }
}

}  // namespace

int64_t gemm_staged_workspace_floats(int64_t m, int64_t n, int64_t k) {
  const int64_t mb = std::min(m, kBlockM), nb = std::min(n, kBlockN), kb = std::min(k, kBlockK);
  return mb * kb + kb * nb + mb * nb;
}

template <class E>
void gemm_staged(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const E* a,
                 int64_t lda, const E* b, int64_t ldb, const E* bias, E* c, int64_t ldc,
                 bool round_tf32, float* workspace) {
  const int64_t mb = std::min(m, kBlockM), kb = std::min(k, kBlockK);
  float* a_block = workspace;                            // (mb, kb), or (kb, mb) when trans_a
  float* b_block = a_block + mb * kb;                    // (kb, nb), or (nb, kb) when trans_b
  float* c_block = b_block + kb * std::min(n, kBlockN);  // (mb, nb)
  for (int64_t i0 = 0; i0 < m; i0 += kBlockM) {
    const int64_t mi = std::min(kBlockM, m - i0);
    for (int64_t j0 = 0; j0 < n; j0 += kBlockN) {
      const int64_t nj = std::min(kBlockN, n - j0);
      for (int64_t r = 0; r < mi; ++r)
        for (int64_t j = 0; j < nj; ++j)
          c_block[r * nj + j] = bias ? convert<float>(bias[j0 + j]) : 0.0f;
      for (int64_t p0 = 0; p0 < k; p0 += kBlockK) {
        const int64_t pk = std::min(kBlockK, k - p0);
        if (trans_a)
          widen(a + p0 * lda + i0, lda, pk, mi, round_tf32, a_block);  // (pk, mi)
        else
          widen(a + i0 * lda + p0, lda, mi, pk, round_tf32, a_block);  // (mi, pk)
        if (trans_b)
          widen(b + j0 * ldb + p0, ldb, nj, pk, round_tf32, b_block);  // (nj, pk)
        else
          widen(b + p0 * ldb + j0, ldb, pk, nj, round_tf32, b_block);  // (pk, nj)
        gemm_f32(trans_a, trans_b, mi, nj, pk, 1.0f, a_block, trans_a ? mi : pk, b_block,
                 trans_b ? pk : nj, 1.0f, c_block, nj);
      }
      for (int64_t r = 0; r < mi; ++r)
        for (int64_t j = 0; j < nj; ++j)
          c[(i0 + r) * ldc + j0 + j] = convert<E>(c_block[r * nj + j]);
    }
  }
}

#define FITGRAD_STAGED(E)                                                                       \
  template void gemm_staged(bool, bool, int64_t, int64_t, int64_t, const E*, int64_t, const E*, \
                            int64_t, const E*, E*, int64_t, bool, float*);
FITGRAD_STAGED(float)
FITGRAD_STAGED(Half)
FITGRAD_STAGED(BFloat16)
#undef FITGRAD_STAGED

}  // namespace fitgrad::cpu
