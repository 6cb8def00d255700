// oneDNN matmul (see dnnl_matmul.h).
//
// Transposes and leading dimensions become the strides of oneDNN's memory descriptors, so
// no operand is copied; alpha is oneDNN's output scale and beta its sum post-op. oneDNN
// keeps its own cache of compiled primitives (keyed by shapes, strides and attributes), so
// a training loop that repeats its shapes builds each one once. The engine is process-wide;
// oneDNN runs on the OpenMP runtime of the rest of the CPU backend and uses the calling
// thread's OpenMP thread count, which this sets to `threads` for the call and restores.
// oneDNN's packing buffers are its own (library-managed scratchpad), outside the ledger,
// as OpenBLAS's and Eigen's are.
//
// Note [oneDNN's bf16 matmul needs AVX-512]
// oneDNN 2.6 has a bf16 matmul only on AVX-512 CPUs (emulated on avx512_core, native with
// AVX512-BF16); elsewhere creating the primitive fails ("could not create a primitive
// descriptor iterator"). So whether the bf16 GEMM may use oneDNN is decided once, at the
// first question: the ISA level (Note [CPU ISA levels] in tensor/cpu_isa.cpp) must be avx512 or above,
// and oneDNN must create a small bf16 matmul under its ISA cap (FITGRAD_CPU_ISA here, or
// oneDNN's own DNNL_MAX_CPU_ISA). When it cannot, the bf16 GEMM is staged through the fp32
// GEMM (gemm_bf16.cpp). Any oneDNN failure that still happens is rethrown naming the
// product's dtypes, shapes and layout, and oneDNN's reason.
#include "tensor/cpu/dnnl_matmul.h"

#include <mutex>
#include <string>
#include <unordered_map>

#include "tensor/cpu_isa.h"
#include "tensor/error.h"

#ifdef FITGRAD_HAVE_DNNL
#include <dnnl.hpp>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

namespace fitgrad::cpu {

#ifdef FITGRAD_HAVE_DNNL
namespace {

using dnnl::memory;

// oneDNN's ISA cap for a forced fitgrad level; set once, before oneDNN builds any kernel.
void cap_isa_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (!cpu_isa_forced()) return;
    dnnl::cpu_isa cap = dnnl::cpu_isa::all;
    switch (cpu_isa()) {
      case CpuIsa::portable: cap = dnnl::cpu_isa::sse41; break;
      case CpuIsa::avx2: cap = dnnl::cpu_isa::avx2; break;
      case CpuIsa::avx512: cap = dnnl::cpu_isa::avx512_core_vnni; break;
      case CpuIsa::avx512_bf16: cap = dnnl::cpu_isa::avx512_core_bf16; break;
      case CpuIsa::amx: cap = dnnl::cpu_isa::all; break;
    }
    try {
      dnnl::set_max_cpu_isa(cap);
    } catch (const dnnl::error& e) {
      throw Error(fmt::format("[dnnl_matmul] FITGRAD_CPU_ISA={} could not cap oneDNN: {}",
                              cpu_isa_name(cpu_isa()), e.what()));
    }
  });
}

dnnl::engine& engine() {
  cap_isa_once();
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

memory::data_type data_type(DType t) {
  FG_CHECK(t == DType::f32 || t == DType::bf16, "[dnnl_matmul] dtype must be f32 or bf16, got {}",
           dtype_name(t));
  return t == DType::f32 ? memory::data_type::f32 : memory::data_type::bf16;
}

// A (rows, cols) row-major matrix with leading dimension ld, or its transpose stored (cols,
// rows): as oneDNN dims and strides of the logical (rows, cols) view.
memory::desc matrix(int64_t rows, int64_t cols, int64_t ld, bool transposed, memory::data_type t) {
  const memory::dims strides = transposed ? memory::dims{1, ld} : memory::dims{ld, 1};
  return memory::desc({rows, cols}, t, strides);
}

// Sets the calling thread's OpenMP thread count for its lifetime.
class OmpThreads {
 public:
  explicit OmpThreads(int threads) {
#ifdef _OPENMP
    saved_ = omp_get_max_threads();
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
  }
  ~OmpThreads() {
#ifdef _OPENMP
    omp_set_num_threads(saved_);
#endif
  }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

 private:
  int saved_ = 1;
};

// Creates (and drops) a bf16 matmul primitive of a training product's size: the name of the
// implementation oneDNN chose for it ("brg:avx512_core_bf16", "brg:avx512_core_amx_bf16",
// ...), empty when oneDNN has none here.
// Note [The bf16 probe's size]
// oneDNN 2.6 picks its implementation per shape: on an AMX Xeon a 16 x 16 product gets
// "brg:avx512_core_bf16" and 64 x 64 and up get "brg:avx512_core_amx_bf16" (2026-12-04,
// bench/RESULTS.md, issue 45). A 16 x 16 probe therefore called an AMX machine "no AMX", and
// the bf16 GEMM rule (Note [When oneDNN's bf16 matmul pays]) staged every bf16 product there
// through the fp32 GEMM. The probe asks at 256 x 256 x 256, a size every product of a
// training step reaches or passes.
std::string bf16_matmul_probe() {
  constexpr int64_t n = 256;
  const memory::desc ad({n, n}, memory::data_type::bf16, memory::dims{n, 1});
  const memory::desc cd({n, n}, memory::data_type::f32, memory::dims{n, 1});
  try {
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, ad, cd), engine());
    return pd.impl_info_str();
  } catch (const dnnl::error&) {
    return {};
  }
}

// The probe's answer, asked once (Note [oneDNN's bf16 matmul needs AVX-512]).
const std::string& bf16_matmul_impl() {
  static const std::string impl =
      cpu_isa_at_least(CpuIsa::avx512) ? bf16_matmul_probe() : std::string();
  return impl;
}

void matmul(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, DType in, const void* a,
            int64_t lda, const void* b, int64_t ldb, const void* bias, float alpha, float beta,
            DType out, void* c, int64_t ldc, int threads) {
  const memory::data_type ti = data_type(in), to = data_type(out);
  const memory::desc ad = matrix(m, k, lda, trans_a, ti);
  const memory::desc bd = matrix(k, n, ldb, trans_b, ti);
  const memory::desc cd = matrix(m, n, ldc, false, to);
  const memory::desc biasd = bias ? memory::desc({1, n}, ti, memory::dims{n, 1}) : memory::desc();
  dnnl::primitive_attr attr;
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops ops;
    ops.append_sum(beta);
    attr.set_post_ops(ops);
  }
  // The primitive is planned for the thread count it runs on: set it before planning.
  const OmpThreads omp(threads);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, biasd, cd), attr, engine());
  const dnnl::matmul prim(pd);
  dnnl::stream s(engine());
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, memory(ad, engine(), const_cast<void*>(a))},
      {DNNL_ARG_WEIGHTS, memory(bd, engine(), const_cast<void*>(b))},
      {DNNL_ARG_DST, memory(cd, engine(), c)}};
  if (bias) args.emplace(DNNL_ARG_BIAS, memory(biasd, engine(), const_cast<void*>(bias)));
  prim.execute(s, args);
  s.wait();
}

}  // namespace

bool dnnl_available() { return true; }

std::string dnnl_description() {
  const dnnl_version_t* v = ::dnnl_version();
  return fmt::format("oneDNN {}.{}.{}", v->major, v->minor, v->patch);
}

bool dnnl_bf16_matmul_available() { return !bf16_matmul_impl().empty(); }

bool dnnl_bf16_matmul_on_amx() { return bf16_matmul_impl().find("amx") != std::string::npos; }

void dnnl_matmul(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, DType in,
                 const void* a, int64_t lda, const void* b, int64_t ldb, const void* bias,
                 float alpha, float beta, DType out, void* c, int64_t ldc, int threads) {
  try {
    matmul(trans_a, trans_b, m, n, k, in, a, lda, b, ldb, bias, alpha, beta, out, c, ldc, threads);
  } catch (const dnnl::error& e) {
    throw Error(fmt::format(
        "[dnnl_matmul] oneDNN failed on the {} product ({}, {}){} @ ({}, {}){} -> {} ({}, {}) on "
        "this CPU (fitgrad ISA level {}): {}",
        dtype_name(in), trans_a ? k : m, trans_a ? m : k, trans_a ? "^T" : "", trans_b ? n : k,
        trans_b ? k : n, trans_b ? "^T" : "", dtype_name(out), m, n, cpu_isa_name(cpu_isa()),
        e.what()));
  }
}

#else

bool dnnl_available() { return false; }

std::string dnnl_description() { return "no oneDNN"; }

bool dnnl_bf16_matmul_available() { return false; }

bool dnnl_bf16_matmul_on_amx() { return false; }

void dnnl_matmul(bool, bool, int64_t, int64_t, int64_t, DType, const void*, int64_t, const void*,
                 int64_t, const void*, float, float, DType, void*, int64_t, int) {
  throw Error("[dnnl_matmul] this build has no oneDNN (configure with libdnnl-dev)");
}

#endif

}  // namespace fitgrad::cpu
