// The bf16 GEMV (see gemv_bf16.h).
//
// Note [bf16 GEMV]
// Decoding one token multiplies one row by every weight of the model: for SmolLM2-135M in
// bf16, 270 MB per token, bound by memory bandwidth (23.5 GB/s read on 2 cores of the AMX
// Xeon of bench/RESULTS.md, issue 45). oneDNN 2.6 runs a (1, k) x (k, n) bf16 product on its
// AMX kernel, whose tiles are 16 rows tall, at 14-16 GB/s of weights there: 19 of the 23 ms
// of a token. This kernel streams the weight rows instead: output j is the dot product of a's
// row with b's row j, both contiguous, four weight rows at a time (a's 32 values, loaded once,
// serve four), with the AVX512-BF16 dot product (two bf16 products summed into an f32 lane)
// and a software prefetch of the next four rows. Measured alone at 21-26 GB/s on the shapes
// of SmolLM2's layers and head. A k that is not a multiple of 32 ends with a masked load (the
// absent lanes are zero and add nothing). The lanes are summed in a fixed order at the end,
// and each thread owns whole chunks of outputs, so a result's bits never depend on the thread
// count. The kernel exists where the level in force has AVX512-BF16 (the dot product is
// native there); elsewhere a one-row product stays on the GEMM (gemm_bf16.h, or staged).
#include "tensor/cpu/gemv_bf16.h"

#include <algorithm>

#include "tensor/cpu_isa.h"
#include "tensor/error.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define FITGRAD_GEMV_BF16 1
#endif

namespace fitgrad::cpu {

#ifdef FITGRAD_GEMV_BF16
namespace {

// Outputs per OpenMP chunk: 64 weight rows, 74 KB at k = 576.
constexpr int64_t kOutputsPerChunk = 64;

#define FITGRAD_TARGET_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// The 32 bf16 at p (n <= 32 of them; the rest read as zero).
FITGRAD_TARGET_BF16 inline __m512bh load32(const BFloat16* p, int64_t n) {
  if (n >= 32) return (__m512bh)_mm512_loadu_si512(p);
  return (__m512bh)_mm512_maskz_loadu_epi16(__mmask32((uint64_t(1) << n) - 1), p);
}

// The 16 lanes of s summed in order (GCC 12's _mm512_reduce_add_ps trips -Wmaybe-uninitialized).
FITGRAD_TARGET_BF16 inline float lane_sum(__m512 s) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  float t = 0.0f;
  for (float v : lanes) t += v;
  return t;
}

// y[j - j0] = a . b_j for j in [j0, j1), in f32.
FITGRAD_TARGET_BF16 void dot_rows(int64_t k, const BFloat16* a, const BFloat16* b, int64_t ldb,
                                  int64_t j0, int64_t j1, float* y) {
  int64_t j = j0;
  for (; j + 4 <= j1; j += 4) {
    const BFloat16* r0 = b + j * ldb;
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (int64_t i = 0; i < k; i += 32) {
      const char* next = reinterpret_cast<const char*>(r0 + 4 * ldb + i);
      _mm_prefetch(next, _MM_HINT_T0);
      _mm_prefetch(next + 2 * ldb, _MM_HINT_T0);
      _mm_prefetch(next + 4 * ldb, _MM_HINT_T0);
      _mm_prefetch(next + 6 * ldb, _MM_HINT_T0);
      const int64_t w = std::min<int64_t>(32, k - i);
      const __m512bh x = load32(a + i, w);
      s0 = _mm512_dpbf16_ps(s0, x, load32(r0 + i, w));
      s1 = _mm512_dpbf16_ps(s1, x, load32(r0 + ldb + i, w));
      s2 = _mm512_dpbf16_ps(s2, x, load32(r0 + 2 * ldb + i, w));
      s3 = _mm512_dpbf16_ps(s3, x, load32(r0 + 3 * ldb + i, w));
    }
    y[j - j0] = lane_sum(s0);
    y[j + 1 - j0] = lane_sum(s1);
    y[j + 2 - j0] = lane_sum(s2);
    y[j + 3 - j0] = lane_sum(s3);
  }
  for (; j < j1; ++j) {
    __m512 s = _mm512_setzero_ps();
    for (int64_t i = 0; i < k; i += 32) {
      const int64_t w = std::min<int64_t>(32, k - i);
      s = _mm512_dpbf16_ps(s, load32(a + i, w), load32(b + j * ldb + i, w));
    }
    y[j - j0] = lane_sum(s);
  }
}

}  // namespace

bool gemv_bf16_available() { return cpu_isa_at_least(CpuIsa::avx512_bf16); }

void gemv_bf16(int64_t n, int64_t k, const BFloat16* a, const BFloat16* b, int64_t ldb,
               const BFloat16* bias, void* c, DType c_dtype) {
  FG_CHECK(gemv_bf16_available(), "[gemv_bf16] needs AVX512-BF16 (ISA level {})",
           cpu_isa_name(cpu_isa()));
  FG_CHECK(n >= 0 && k >= 0, "[gemv_bf16] negative size n = {}, k = {}", n, k);
  FG_CHECK(c_dtype == DType::f32 || c_dtype == DType::bf16,
           "[gemv_bf16] the result must be f32 or bf16, got {}", dtype_name(c_dtype));
  const int64_t chunks = (n + kOutputsPerChunk - 1) / kOutputsPerChunk;
#pragma omp parallel for schedule(static) if (chunks > 1 && n * k >= (int64_t(1) << 15))
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const int64_t j0 = ch * kOutputsPerChunk, j1 = std::min(n, j0 + kOutputsPerChunk);
    float y[kOutputsPerChunk];
    dot_rows(k, a, b, ldb, j0, j1, y);
    for (int64_t j = j0; j < j1; ++j) {
      const float v = bias ? y[j - j0] + float(bias[j]) : y[j - j0];
      if (c_dtype == DType::f32)
        static_cast<float*>(c)[j] = v;
      else
        static_cast<BFloat16*>(c)[j] = BFloat16(v);
    }
  }
}

#else

bool gemv_bf16_available() { return false; }

void gemv_bf16(int64_t, int64_t, const BFloat16*, const BFloat16*, int64_t, const BFloat16*, void*,
               DType) {
  throw Error("[gemv_bf16] this build has no AVX512-BF16 GEMV (x86-64 with GCC or Clang)");
}

#endif

}  // namespace fitgrad::cpu
