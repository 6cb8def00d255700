// The staged low-precision GEMM (see gemm_staged.h).
//
// Note [Staged GEMM blocks]
// The result is cut into blocks of up to kBlockM x kBlockN and the shared dimension into
// panels of up to kBlockK. For each result block, every k panel widens its slice of A
// (kBlockM x kBlockK) and of B (kBlockK x kBlockN) into f32 and adds their product into the
// block's f32 accumulator (seeded with the bias, or zero) with gemm_f32; the block is then
// rounded into c once. So the workspace is at most 1024 x 512 + 512 x 1024 + 1024 x 1024
// floats (8 MiB) for any product, and the rounding is that of one f32 result per element,
// as in the f32 GEMM on widened operands except for how the k sum is split into panels.
// A is widened ceil(n / kBlockN) times and B ceil(m / kBlockM) times. In flops that is under
// 1% of the work for any product worth a GEMM, but the widening is memory-bound: with 256-row
// blocks, the GPT-2 head's three products of a training step widened the (50257, 384) weight
// or its (2048, 384) partner 8 to 197 times, about 700 million conversions per step, and the
// bf16 step on the AVX2 path was 1.4-1.5x the fp32 one. 1024-row blocks widen B a quarter as
// often; the k panels, and so every element's sum, are unchanged. Slices are widened in
// their stored layout (a transposed operand stays transposed for gemm_f32).
//
// Note [Staging on the GEMM's threads]
// The widening, the accumulator's seeding and the final rounding are memory-bound loops
// around a GEMM that runs on gemm_threads(). Run on the calling thread alone, they left the
// GEMM's other threads spinning in the OpenMP runtime: on the bf16 training step of
// bench/train_step_bench under FITGRAD_CPU_ISA=avx2 (no bf16 GEMM), gemm_staged's own loops
// were 6% of the samples and libgomp's spin-waits 19% (bench/RESULTS.md, issue 30). They now
// split their rows over the same threads; every element is still converted by itself, so
// the result does not depend on the thread count.
#include "tensor/cpu/gemm_staged.h"

#include <algorithm>
#include <type_traits>

#include "tensor/convert.h"
#include "tensor/cpu/bf16_rows.h"
#include "tensor/cpu/gemm.h"

namespace fitgrad::cpu {
namespace {

constexpr int64_t kBlockM = 1024, kBlockN = 1024, kBlockK = 512;
constexpr int64_t kParallelMin = int64_t(1) << 14;  // elements worth waking the threads for

// dst (rows, cols), row stride cols, = src's rows x cols at row stride ld, widened and, with
// tf32, rounded to TF32 (Note [Staging on the GEMM's threads]).
template <class E>
void widen(const E* src, int64_t ld, int64_t rows, int64_t cols, bool tf32, float* dst) {
#pragma omp parallel for schedule(static) \
    num_threads(gemm_threads()) if (rows * cols >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const E* in = src + r * ld;
    float* out = dst + r * cols;
    if (tf32)
      for (int64_t j = 0; j < cols; ++j) out[j] = round_to_tf32(convert<float>(in[j]));
    else if constexpr (std::is_same_v<E, BFloat16>)
      widen_bf16(in, cols, out);
    else
      for (int64_t j = 0; j < cols; ++j) out[j] = convert<float>(in[j]);
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
#pragma omp parallel for schedule(static) num_threads(gemm_threads()) if (mi * nj >= kParallelMin)
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
#pragma omp parallel for schedule(static) num_threads(gemm_threads()) if (mi * nj >= kParallelMin)
      for (int64_t r = 0; r < mi; ++r) {
        E* out = c + (i0 + r) * ldc + j0;
        if constexpr (std::is_same_v<E, BFloat16>)
          round_to_bf16(c_block + r * nj, nj, out);
        else
          for (int64_t j = 0; j < nj; ++j) out[j] = convert<E>(c_block[r * nj + j]);
      }
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
