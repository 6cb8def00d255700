// fp32 CPU GEMM: argument checks, then oneDNN's matmul, cblas_sgemm or Eigen maps (see gemm.h).
//
// Note [GEMM backend]
// ~~~~~~~~~~~~~~~~~~~
// Issue 3: "matmul uses Eigen; OpenBLAS may back it if it measures faster; decide by
// benchmark". Decision: OpenBLAS's cblas_sgemm when CMake found it (FITGRAD_HAVE_OPENBLAS),
// Eigen otherwise, and Eigen also for a size beyond Debian's 32-bit blasint.
//
// Measured by bench/gemm_bench.cpp (2-core AMD EPYC, Zen 4 with AVX-512, shared with other
// jobs, so best of 3; `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE`; OpenBLAS 0.3.21 picks its
// Cooperlake kernels; Eigen 3.4 with OpenMP), GFLOP/s:
//   portable build (Eigen gets SSE2 only)  square 512-4096: OpenBLAS 80-101, Eigen 22-38
//                                          GPT-2 B*T=4096 shapes: Eigen 0.20-0.40x OpenBLAS
//   FITGRAD_NATIVE=ON (Eigen gets AVX-512) both cores free: OpenBLAS 195-200, Eigen 145-155
//                                          one thread: Eigen 0.61-0.82x OpenBLAS
// Eigen reaches 0.9x nowhere, even compiled for this CPU, and the default build cannot use
// -march=native (it must run on other machines). OpenBLAS (DYNAMIC_ARCH) picks its kernel at
// run time, so the portable build gets AVX-512 for free. With OpenBLAS the fitgrad arm is
// 0.95-1.0x raw cblas_sgemm (the wrapper costs only the checks).
//
// Update (issue 9), on the 2-core Intel Xeon with AVX-512 and AMX that ran the Engine I
// benchmarks (bench/RESULTS.md): there OpenBLAS's sgemm reaches only 30 GFLOP/s at 2048^3
// (the kernel DYNAMIC_ARCH picks for that CPU; Eigen 29), while oneDNN's fp32 matmul
// (libdnnl 2.6, brgemm for avx512_core) reaches 190-215 at 768-2048^3. So when CMake finds
// oneDNN (FITGRAD_HAVE_DNNL) it is the default backend, then OpenBLAS, then Eigen. oneDNN
// computes in fp32 (its default fpmath mode is strict, no bf16 or TF32 shortcuts), splits
// the output over threads, and gives bitwise-equal results for a fixed shape and thread
// count (TwoRunsAreBitwiseEqual runs on it too).
//
// Threads: the libraries get the process's one thread budget (Note [One thread budget]), or
// set_gemm_threads(n). Determinism:
// both split the output over threads (OpenBLAS by rows and columns of C, Eigen by blocks of
// C); neither splits k, so each C element is one thread's sum in a fixed order, and a fixed
// shape and thread count give bitwise-equal results run to run (gemm_test's
// TwoRunsAreBitwiseEqual checks 1, 2 and 3 threads on both backends). Results may differ
// between thread counts, CPUs (the kernel is chosen per CPU) and backends. On oneDNN a very
// long k is cut into panels summed in a fixed order (Note [Panels of a long output]).
#include "tensor/cpu/gemm.h"

#include "tensor/cpu/dnnl_matmul.h"
#include "tensor/cpu/mkl_blas.h"

// GCC 12 reports its own AVX-512 intrinsics (the `__Y = __Y` idiom in avx512fintrin.h) as
// maybe-uninitialized once Eigen's packing code inlines them (FITGRAD_NATIVE builds): a false
// positive that -Werror would turn into a failed build.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tensor/cpu_isa.h"
#include "tensor/error.h"

#ifdef FITGRAD_HAVE_OPENBLAS
#include <cblas.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

namespace fitgrad::cpu {
namespace {

// Why `backend` cannot run here.
std::string unavailable_reason(GemmBackend backend) {
  switch (backend) {
    case GemmBackend::eigen: break;
    case GemmBackend::openblas:
      return "this build has no OpenBLAS (CMake found no libopenblas-dev)";
    case GemmBackend::dnnl: return "this build has no oneDNN (CMake found no libdnnl-dev)";
    case GemmBackend::mkl:
      return mkl_description() + "; tools/install-deps.sh installs it, or FITGRAD_MKL names it";
  }
  return "";
}

// Note [GEMM backend per machine]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Issue 60 measured the libraries a user's PyTorch builds on against Debian's oneDNN 2.6 at the
// training step's shapes (bench/gemm_libraries.sh, bench/RESULTS.md "GEMM libraries"). On a
// 2-core AMX Xeon, oneMKL 2026.2's sgemm (the library PyTorch's fp32 GEMM is) ran every
// product of the GPT-2 and SmolLM2 steps at 1.01-1.22x oneDNN 2.6's fp32 matmul (1.13x over
// all of them; PyPI's oneDNN 2026.1 gave 1.02x). So where oneMKL loads (Note [oneMKL at run
// time] in mkl_blas.cpp) and the CPU is Intel's, it is the default; on other CPUs oneMKL was
// not measured and oneDNN stays (then OpenBLAS, then Eigen, as Note [GEMM backend] says). The
// choice is a fact of the machine, never a timing, so load never changes a run's rounding.
// FITGRAD_GEMM=eigen|openblas|dnnl|mkl overrides it (an unknown or missing library is an
// error naming why), and `fitgrad` commands print the GEMM in use (gemm_description()).
GemmBackend machine_default_backend() {
  if (mkl_available() && cpu_is_intel()) return GemmBackend::mkl;
#if defined(FITGRAD_HAVE_DNNL)
  return GemmBackend::dnnl;
#elif defined(FITGRAD_HAVE_OPENBLAS)
  return GemmBackend::openblas;
#else
  return GemmBackend::eigen;
#endif
}

GemmBackend chosen_backend() {
  const char* asked = std::getenv("FITGRAD_GEMM");
  if (asked == nullptr || *asked == '\0') return machine_default_backend();
  for (GemmBackend b :
       {GemmBackend::eigen, GemmBackend::openblas, GemmBackend::dnnl, GemmBackend::mkl}) {
    if (std::string_view(asked) != gemm_backend_name(b)) continue;
    FG_CHECK(gemm_backend_available(b), "FITGRAD_GEMM={}: {}", asked, unavailable_reason(b));
    return b;
  }
  throw Error(
      fmt::format("FITGRAD_GEMM={} names no GEMM backend: use eigen, openblas, dnnl or mkl "
                  "(or unset it for this machine's default)",
                  asked));
}

// The backend in force; FITGRAD_GEMM is read at the first question.
std::atomic<GemmBackend>& backend_slot() {
  static std::atomic<GemmBackend> slot{chosen_backend()};
  return slot;
}

std::atomic<int> g_threads{0};  // 0: not yet applied to the backends
std::once_flag g_threads_once;

void apply_threads(int threads) {
  Eigen::setNbThreads(threads);
#ifdef FITGRAD_HAVE_OPENBLAS
  openblas_set_num_threads(threads);
#endif
  g_threads.store(threads);
}

// Note [One thread budget]
// The CPU backend's own kernels (elementwise, norms, attention, loss, optimizers) run on
// OpenMP's thread count, omp_get_max_threads(): OMP_NUM_THREADS when it is set, else every
// core. The GEMM libraries start from the same number, whatever OPENBLAS_NUM_THREADS says,
// and oneDNN is handed it per call (dnnl_matmul.cpp), so one variable sets the budget of all
// of them, as OMP_NUM_THREADS does for PyTorch. The GEMMs used to take every hardware thread
// instead: under `fitgrad launch --nproc_per_node 2` on 2 cores, where each rank gets
// OMP_NUM_THREADS=1 (Note [The launcher] in apps/launch.h), each rank's GEMMs still ran 2
// threads, 4 on 2 cores. Past 2 cores the budget is the same knob: N ranks get cores / N each,
// one process every core; loader workers (--dataloader_num_workers) are extra threads that
// mostly wait for the step, outside the budget.
int default_threads() {
#ifdef _OPENMP
  return std::max(1, omp_get_max_threads());
#else
  return int(std::max(1u, std::thread::hardware_concurrency()));
#endif
}

void ensure_threads() {
  std::call_once(g_threads_once, [] {
    if (g_threads.load() == 0) apply_threads(default_threads());
  });
}

void check_args(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                const float* a, int64_t lda, const float* b, int64_t ldb, const float* c,
                int64_t ldc) {
  FG_CHECK(m >= 0, "[gemm] m = {} is negative", m);
  FG_CHECK(n >= 0, "[gemm] n = {} is negative", n);
  FG_CHECK(k >= 0, "[gemm] k = {} is negative", k);
  // Row-major: each leading dimension is at least the stored row's width (BLAS: max(1, .)).
  const int64_t a_width = trans_a ? m : k, b_width = trans_b ? k : n;
  FG_CHECK(lda >= std::max<int64_t>(1, a_width),
           "[gemm] lda = {} is smaller than A's row width {} (trans_a = {}, m = {}, k = {})", lda,
           a_width, trans_a, m, k);
  FG_CHECK(ldb >= std::max<int64_t>(1, b_width),
           "[gemm] ldb = {} is smaller than B's row width {} (trans_b = {}, k = {}, n = {})", ldb,
           b_width, trans_b, k, n);
  FG_CHECK(ldc >= std::max<int64_t>(1, n), "[gemm] ldc = {} is smaller than C's row width n = {}",
           ldc, n);
  if (m == 0 || n == 0) return;
  FG_CHECK(c != nullptr, "[gemm] C is null for a ({},{}) result", m, n);
  if (k == 0 || alpha == 0.0f) return;
  FG_CHECK(a != nullptr, "[gemm] A is null (m = {}, k = {})", m, k);
  FG_CHECK(b != nullptr, "[gemm] B is null (k = {}, n = {})", k, n);
}

// C = beta * C, with beta == 0 writing zeros (BLAS: C is not read).
void scale_c(int64_t m, int64_t n, float beta, float* c, int64_t ldc) {
  if (beta == 1.0f) return;
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    if (beta == 0.0f) {
      std::fill(row, row + n, 0.0f);
    } else {
      for (int64_t j = 0; j < n; ++j) row[j] *= beta;
    }
  }
}

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;
using MutMap = Eigen::Map<RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;

template <class OpA, class OpB>
void eigen_product(const OpA& op_a, const OpB& op_b, float alpha, float beta, MutMap& c) {
  if (beta == 0.0f) {
    c.noalias() = alpha * op_a * op_b;
  } else {
    if (beta != 1.0f) c *= beta;
    c.noalias() += alpha * op_a * op_b;
  }
}

void eigen_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                int64_t ldc) {
  MutMap cm(c, m, n, Eigen::OuterStride<>(ldc));
  const ConstMap am(a, trans_a ? k : m, trans_a ? m : k, Eigen::OuterStride<>(lda));
  const ConstMap bm(b, trans_b ? n : k, trans_b ? k : n, Eigen::OuterStride<>(ldb));
  if (!trans_a && !trans_b) eigen_product(am, bm, alpha, beta, cm);
  if (!trans_a && trans_b) eigen_product(am, bm.transpose(), alpha, beta, cm);
  if (trans_a && !trans_b) eigen_product(am.transpose(), bm, alpha, beta, cm);
  if (trans_a && trans_b) eigen_product(am.transpose(), bm.transpose(), alpha, beta, cm);
}

// Debian's libopenblas and oneMKL's LP64 interface take 32-bit int sizes; a larger product
// runs on Eigen.
bool fits_int(int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc) {
  return std::max({m, n, k, lda, ldb, ldc}) <= int64_t(INT_MAX);
}

// The product itself, arguments already checked and m, n, k, alpha all nonzero.
// Note [Panels of a long output]
// oneDNN's fp32 matmul ran a product with a vocabulary-long side slower than the same product
// cut into panels along that side: GPT-2's head at 2048 rows, C = 384, V = 50257 on a 2-core
// AVX-512 Xeon, 11-15 rounds interleaved call by call (bench/RESULTS.md, "The head's three
// products, alone" and "Panels of a long k"): X W^T in column panels took 0.85-0.88x the whole
// product's time, dW = dY^T X in row panels 0.66-0.73x, and dX = dY W (k = V) in k panels
// 0.82-0.86x. So a side longer than kPanel is cut into equal panels of at most kPanel, each
// its own oneDNN call. An output side's panels leave every output element one k-sum of one
// call. k panels run in order, the first with the caller's beta and the rest adding to C
// (beta = 1), so an element is the sum of its panels' partial sums in panel order: a different
// rounding than one call's, and still bitwise the same for a fixed shape and thread count.
constexpr int64_t kPanel = 16384;

// The length of each of the equal panels a side of `length` > kPanel is cut into (the last
// one may be shorter).
int64_t panel_length(int64_t length) {
  const int64_t panels = (length + kPanel - 1) / kPanel;
  return (length + panels - 1) / panels;
}

void dnnl_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
               int64_t ldc) {
  const int threads = g_threads.load(std::memory_order_relaxed);
  if (m > kPanel) {  // row panels: op(a)'s rows, c's rows
    const int64_t rows = panel_length(m);
    for (int64_t r = 0; r < m; r += rows)
      dnnl_gemm(trans_a, trans_b, std::min(rows, m - r), n, k, alpha, trans_a ? a + r : a + r * lda,
                lda, b, ldb, beta, c + r * ldc, ldc);
    return;
  }
  if (k > kPanel) {  // k panels: op(a)'s columns, op(b)'s rows, summed into c in order
    const int64_t depth = panel_length(k);
    for (int64_t p = 0; p < k; p += depth)
      dnnl_gemm(trans_a, trans_b, m, n, std::min(depth, k - p), alpha,
                trans_a ? a + p * lda : a + p, lda, trans_b ? b + p : b + p * ldb, ldb,
                p == 0 ? beta : 1.0f, c, ldc);
    return;
  }
  if (n > kPanel) {  // column panels: op(b)'s columns, c's columns
    const int64_t cols = panel_length(n);
    for (int64_t j = 0; j < n; j += cols)
      dnnl_matmul(trans_a, trans_b, m, std::min(cols, n - j), k, DType::f32, a, lda,
                  trans_b ? b + j * ldb : b + j, ldb, nullptr, alpha, beta, DType::f32, c + j, ldc,
                  threads);
    return;
  }
  dnnl_matmul(trans_a, trans_b, m, n, k, DType::f32, a, lda, b, ldb, nullptr, alpha, beta,
              DType::f32, c, ldc, threads);
}

void gemm_unchecked(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                    int64_t ldc) {
  const GemmBackend backend = backend_slot().load(std::memory_order_relaxed);
  if (backend == GemmBackend::dnnl) {
    dnnl_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (backend == GemmBackend::mkl && fits_int(m, n, k, lda, ldb, ldc)) {
    mkl_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
              g_threads.load(std::memory_order_relaxed));
    return;
  }
#ifdef FITGRAD_HAVE_OPENBLAS
  if (backend == GemmBackend::openblas && fits_int(m, n, k, lda, ldb, ldc)) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, blasint(m), blasint(n), blasint(k), alpha, a,
                blasint(lda), b, blasint(ldb), beta, c, blasint(ldc));
    return;
  }
#endif
  eigen_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_checked(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                  const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                  int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0 || alpha == 0.0f) {
    scale_c(m, n, beta, c, ldc);
    return;
  }
  gemm_unchecked(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace

float round_to_tf32(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u) return x;  // infinity or NaN
  // Round the 13 dropped mantissa bits to nearest, ties to even; a carry into the exponent
  // is the correct rounding up (to the next binade, or to infinity past the largest TF32).
  bits += 0x0fffu + ((bits >> 13) & 1u);
  bits &= ~0x1fffu;
  std::memcpy(&x, &bits, sizeof bits);
  return x;
}

void gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
              int64_t ldc) {
  check_args(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, c, ldc);
  ensure_threads();
  gemm_checked(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_f32_batched(bool trans_a, bool trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
                      float alpha, const float* a, int64_t lda, int64_t stride_a, const float* b,
                      int64_t ldb, int64_t stride_b, float beta, float* c, int64_t ldc,
                      int64_t stride_c) {
  FG_CHECK(batch >= 0, "[gemm] batch = {} is negative", batch);
  check_args(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, c, ldc);
  FG_CHECK(stride_a >= 0, "[gemm] stride_a = {} is negative", stride_a);
  FG_CHECK(stride_b >= 0, "[gemm] stride_b = {} is negative", stride_b);
  if (batch > 1 && m > 0 && n > 0) {
    FG_CHECK(stride_c >= (m - 1) * ldc + n,
             "[gemm] stride_c = {} makes C's matrices overlap (m = {}, n = {}, ldc = {})", stride_c,
             m, n, ldc);
  }
  ensure_threads();
  // One multithreaded GEMM per matrix: each result is computed exactly as gemm_f32 would,
  // so bmm and a loop of matmuls agree bitwise.
  for (int64_t i = 0; i < batch; ++i) {
    gemm_checked(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb,
                 beta, c + i * stride_c, ldc);
  }
}

GemmBackend gemm_backend() { return backend_slot().load(); }

bool gemm_backend_available(GemmBackend backend) {
  switch (backend) {
    case GemmBackend::eigen: return true;
    case GemmBackend::dnnl: return dnnl_available();
    case GemmBackend::mkl: return mkl_available();
    case GemmBackend::openblas:
#ifdef FITGRAD_HAVE_OPENBLAS
      return true;
#else
      return false;
#endif
  }
  return false;
}

void set_gemm_backend(GemmBackend backend) {
  FG_CHECK(gemm_backend_available(backend), "[gemm] backend {} is not available: {}",
           gemm_backend_name(backend), unavailable_reason(backend));
  backend_slot().store(backend);
}

const char* gemm_backend_name(GemmBackend backend) {
  switch (backend) {
    case GemmBackend::eigen: return "eigen";
    case GemmBackend::openblas: return "openblas";
    case GemmBackend::dnnl: return "dnnl";
    case GemmBackend::mkl: return "mkl";
  }
  return "?";
}

std::string gemm_description() {
  const GemmBackend backend = gemm_backend();
  std::string what;
  switch (backend) {
    case GemmBackend::eigen: what = "Eigen"; break;
    case GemmBackend::openblas: what = "OpenBLAS"; break;
    case GemmBackend::dnnl: what = dnnl_description(); break;
    case GemmBackend::mkl: what = mkl_description(); break;
  }
  return fmt::format("{} ({}{})", gemm_backend_name(backend), what,
                     std::getenv("FITGRAD_GEMM") ? ", FITGRAD_GEMM" : ", this machine's default");
}

int gemm_threads() {
  ensure_threads();
  return g_threads.load();
}

void set_gemm_threads(int threads) {
  FG_CHECK(threads >= 1, "[gemm] thread count {} is not positive", threads);
  ensure_threads();
  apply_threads(threads);
}

}  // namespace fitgrad::cpu
