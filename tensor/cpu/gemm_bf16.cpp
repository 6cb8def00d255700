// The CPU bf16 GEMM (see gemm_bf16.h).
//
// Note [bf16 GEMM]
// Debian's OpenBLAS 0.3.21 exports no sbgemm, and staging bf16 operands into fp32 copies
// costs two whole-tensor conversions and their memory per product. oneDNN's matmul (Debian's
// libdnnl 2.6) reads bf16 directly, accumulates in f32 and, on a CPU with AVX512-BF16, runs
// on the bf16 dot-product instructions: measured here at 574 GFLOP/s at 2048^3 on 2 cores,
// against about 480 for OpenBLAS's fp32 sgemm (bench/RESULTS.md). Transposes and leading
// dimensions become the strides of oneDNN's memory descriptors, so no operand is copied.
// oneDNN keeps its own cache of compiled primitives (keyed by shapes and strides), so a
// training loop that repeats its shapes builds each one once. The engine and stream are
// process-wide; oneDNN runs on the same OpenMP runtime as the rest of the CPU backend.
#include "tensor/cpu/gemm_bf16.h"

#include "tensor/error.h"

#ifdef FITGRAD_HAVE_DNNL
#include <dnnl.hpp>
#endif

namespace fitgrad::cpu {

#ifdef FITGRAD_HAVE_DNNL
namespace {

using dnnl::memory;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// A (rows, cols) row-major matrix with leading dimension ld, or its transpose stored (cols,
// rows): as oneDNN dims and strides of the logical (rows, cols) view.
memory::desc matrix(int64_t rows, int64_t cols, int64_t ld, bool transposed, memory::data_type t) {
  const memory::dims strides = transposed ? memory::dims{1, ld} : memory::dims{ld, 1};
  return memory::desc({rows, cols}, t, strides);
}

}  // namespace

bool gemm_bf16_available() { return true; }

void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const BFloat16* a,
               int64_t lda, const BFloat16* b, int64_t ldb, const BFloat16* bias, void* c,
               DType c_dtype, int64_t ldc) {
  FG_CHECK(c_dtype == DType::f32 || c_dtype == DType::bf16,
           "[gemm_bf16] the result must be f32 or bf16, got {}", dtype_name(c_dtype));
  FG_CHECK(m >= 0 && n >= 0 && k >= 0, "[gemm_bf16] negative size m = {}, n = {}, k = {}", m, n, k);
  if (m == 0 || n == 0) return;
  using dt = memory::data_type;
  const dt out = c_dtype == DType::f32 ? dt::f32 : dt::bf16;
  if (k == 0) {  // an empty sum: bias, or zeros
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const float v = bias ? float(bias[j]) : 0.0f;
        if (out == dt::f32)
          static_cast<float*>(c)[i * ldc + j] = v;
        else
          static_cast<BFloat16*>(c)[i * ldc + j] = BFloat16(v);
      }
    return;
  }
  const memory::desc ad = matrix(m, k, lda, trans_a, dt::bf16);
  const memory::desc bd = matrix(k, n, ldb, trans_b, dt::bf16);
  const memory::desc cd = matrix(m, n, ldc, false, out);
  const memory::desc biasd =
      bias ? memory::desc({1, n}, dt::bf16, memory::dims{n, 1}) : memory::desc();
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, biasd, cd), engine());
  const dnnl::matmul prim(pd);
  dnnl::stream s(engine());
  memory am(ad, engine(), const_cast<BFloat16*>(a)), bm(bd, engine(), const_cast<BFloat16*>(b));
  memory cm(cd, engine(), c);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
  if (bias) args.emplace(DNNL_ARG_BIAS, memory(biasd, engine(), const_cast<BFloat16*>(bias)));
  prim.execute(s, args);
  s.wait();
}

#else

bool gemm_bf16_available() { return false; }

void gemm_bf16(bool, bool, int64_t, int64_t, int64_t, const BFloat16*, int64_t, const BFloat16*,
               int64_t, const BFloat16*, void*, DType, int64_t) {
  throw Error("[gemm_bf16] this build has no bf16 GEMM (configure with oneDNN, libdnnl-dev)");
}

#endif

}  // namespace fitgrad::cpu
