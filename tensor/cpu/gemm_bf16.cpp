// The CPU bf16 GEMM (see gemm_bf16.h).
//
// Note [bf16 GEMM]
// Debian's OpenBLAS 0.3.21 exports no sbgemm, and staging bf16 operands into fp32 copies
// costs two whole-tensor conversions and their memory per product. oneDNN's matmul (Debian's
// libdnnl 2.6) reads bf16 directly, accumulates in f32 and, on a CPU with AVX512-BF16, runs
// on the bf16 dot-product instructions: measured here at 574 GFLOP/s at 2048^3 on 2 cores,
// against 30 for OpenBLAS's fp32 sgemm and 190 for oneDNN's fp32 matmul on the same machine
// (bench/RESULTS.md). Transposes and leading
// dimensions become the strides of oneDNN's memory descriptors, so no operand is copied
// (tensor/cpu/dnnl_matmul.cpp). It runs on the GEMM's thread count (gemm_threads()).
// oneDNN 2.6 has no bf16 matmul below AVX-512 (Note [oneDNN's bf16 matmul needs AVX-512] in
// dnnl_matmul.cpp): there, and under FITGRAD_CPU_ISA=avx2 or lower, gemm_bf16_available()
// is false, decided once, and the front-ends stage bf16 products through the fp32 GEMM
// (gemm_staged.h), with its bounded workspace planned by the CPU's backend rules. They stage
// them too where the bf16 GEMM exists but does not pay (Note [When oneDNN's bf16 matmul pays]).
#include "tensor/cpu/gemm_bf16.h"

#include "tensor/cpu/dnnl_matmul.h"
#include "tensor/cpu/gemm.h"
#include "tensor/cpu_isa.h"
#include "tensor/error.h"

namespace fitgrad::cpu {

bool gemm_bf16_available() { return dnnl_bf16_matmul_available(); }

// Note [When oneDNN's bf16 matmul pays]
// oneDNN's bf16 matmul is fast where it runs on AMX tiles: 574 GFLOP/s at 2048^3 on 2 cores of
// an AMX Xeon against 190-215 for its fp32 matmul (Note [bf16 GEMM]). On an Intel CPU whose
// bf16 products run on the AVX512-BF16 dot-product instructions instead, it is slower than the
// fp32 GEMM: on the 2-core virtual Xeon with AVX512-BF16 and no AMX (bench/RESULTS.md, issue
// 30) oneDNN's bf16 matmul ran at 114-151 GFLOP/s where its fp32 one ran at 173-300, and in
// nine alternating pairs of runs the bf16 autocast training step with its products staged
// through the fp32 GEMM (Note [Staged GEMM blocks] in gemm_staged.cpp) took 0.51-1.03x (median
// 0.77x) the time it took on oneDNN's bf16 matmul, about 1.1x the fp32 step against 1.4x.
// So on Intel CPUs the bf16 GEMM is used only when oneDNN's implementation is AMX; on
// others (AMD's AVX512-BF16 cores, where no measurement was made) it stays the bf16 GEMM, as
// before. The choice is a fact of the CPU (and of the ISA cap, FITGRAD_CPU_ISA), not a timing,
// so a machine's load never changes which rounding a run gets. The memory stays the bf16
// figure either way: the staged path's fp32 blocks are a bounded workspace.
bool gemm_bf16_preferred() {
  static const bool preferred =
      gemm_bf16_available() && (!cpu_is_intel() || dnnl_bf16_matmul_on_amx());
  return preferred;
}

void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const BFloat16* a,
               int64_t lda, const BFloat16* b, int64_t ldb, const BFloat16* bias, void* c,
               DType c_dtype, int64_t ldc) {
  FG_CHECK(c_dtype == DType::f32 || c_dtype == DType::bf16,
           "[gemm_bf16] the result must be f32 or bf16, got {}", dtype_name(c_dtype));
  FG_CHECK(m >= 0 && n >= 0 && k >= 0, "[gemm_bf16] negative size m = {}, n = {}, k = {}", m, n, k);
  FG_CHECK(gemm_bf16_available(),
           "[gemm_bf16] no bf16 GEMM here: this build has no oneDNN, or oneDNN has no bf16 matmul "
           "on this CPU (ISA level {}; AVX-512 needed)",
           cpu_isa_name(cpu_isa()));
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: bias, or zeros
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const float v = bias ? float(bias[j]) : 0.0f;
        if (c_dtype == DType::f32)
          static_cast<float*>(c)[i * ldc + j] = v;
        else
          static_cast<BFloat16*>(c)[i * ldc + j] = BFloat16(v);
      }
    return;
  }
  dnnl_matmul(trans_a, trans_b, m, n, k, DType::bf16, a, lda, b, ldb, bias, 1.0f, 0.0f, c_dtype, c,
              ldc, gemm_threads());
}

}  // namespace fitgrad::cpu
