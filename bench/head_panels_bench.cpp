// The language-model head's three fp32 products (issue 30), each as one oneDNN call against
// gemm_f32, which cuts a side longer than 16384 into panels (Note [Panels of a long output]
// in tensor/cpu/gemm.cpp), and the machine's own FMA rate beside them. A plain program, not a
// Google Benchmark: the forms are interleaved call by call over --rounds rounds, so that the
// machine's slow and fast phases (bench/RESULTS.md: 1.5x between runs of one command on the
// shared 2-core Xeon) fall on every form alike, and the ratio of medians is the figure.
//
//   head_panels_bench [--rows=2048] [--hidden=384] [--vocab=50257] [--rounds=9]
//
// The products, for X (rows, hidden), the tied head W (vocab, hidden) and the logits'
// gradient dY (rows, vocab):
//   forward  logits = X W^T    m = rows,  n = vocab,  k = hidden   (column panels)
//   dX       dY W              m = rows,  n = hidden, k = vocab    (k panels, summed in order)
//   dW       dY^T X            m = vocab, n = hidden, k = rows     (row panels)
// The multiply-add rate is independent FMAs on gemm_threads() threads in the native vector of
// the CPU level in force (cpu_isa(), so FITGRAD_CPU_ISA=avx2 measures AVX2 too; the portable
// level has no FMA and counts a multiply and an add): the ceiling a GEMM's GFLOP/s is read
// against.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench/flag_value.h"
#include "tensor/cpu/dnnl_matmul.h"
#include "tensor/cpu/gemm.h"
#include "tensor/cpu/vec.h"
#include "tensor/cpu_isa.h"

namespace fitgrad {
namespace {

struct Args {
  int64_t rows = 2048, hidden = 384, vocab = 50257;
  int rounds = 9;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&](const char* flag) { return bench::flag_value(s, flag); };
    if (const char* v = value("--rows"))
      a.rows = std::atoll(v);
    else if (const char* v = value("--hidden"))
      a.hidden = std::atoll(v);
    else if (const char* v = value("--vocab"))
      a.vocab = std::atoll(v);
    else if (const char* v = value("--rounds"))
      a.rounds = std::atoi(v);
    else if (s.starts_with("--benchmark_"))  // `make bench` passes BENCH_ARGS to every program
      continue;
    else {
      std::fprintf(stderr,
                   "head_panels_bench: unknown argument '%s'\nusage: head_panels_bench "
                   "[--rows=2048] [--hidden=384] [--vocab=50257] [--rounds=9]\n",
                   s.c_str());
      std::exit(2);
    }
  }
  if (a.rows < 1 || a.hidden < 1 || a.vocab < 1 || a.rounds < 1) {
    std::fprintf(stderr,
                 "head_panels_bench: --rows, --hidden, --vocab and --rounds must be >= 1\n");
    std::exit(2);
  }
  return a;
}

double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Twelve independent multiply-add chains in the native vector of the ISA level in force
// (FITGRAD_ISA_KERNEL, Note [Kernel ISA variants] in tensor/cpu/vec.h; a * b + c contracts to
// one FMA on the AVX2 and AVX-512 variants): more chains than the FMA latency times its ports,
// so the loop runs at the units' throughput. Returns one lane of each chain summed, and the
// vector's lane count in `lanes`.
constexpr int kChains = 12;
constexpr int64_t kIters = 20'000'000;

template <CpuIsa kIsa>
[[gnu::always_inline]] inline float fma_chains_body(int& lanes) {
  using V = typename cpu::Native<kIsa>::F;
  V acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = cpu::splat<V>(0.001f * float(i));
  const V mul = cpu::splat<V>(0.9999f), add = cpu::splat<V>(1e-6f);
  for (int64_t it = 0; it < kIters; ++it)
    for (int i = 0; i < kChains; ++i) acc[i] = acc[i] * mul + add;
  float sink = 0.0f;
  for (int i = 0; i < kChains; ++i) sink += acc[i][0];
  lanes = cpu::kLanes<V>;
  return sink;
}
FITGRAD_ISA_KERNEL(float, fma_chains, (int& lanes), (lanes))

// GFLOP/s of every thread's chains together.
double fma_rate(int threads) {
  const double t0 = seconds();
  float sink = 0.0f;
  int lanes = 0;  // every thread runs the same variant
#pragma omp parallel num_threads(threads) reduction(+ : sink)
  {
    int mine = 0;
    sink += fma_chains(mine);
#pragma omp master
    lanes = mine;
  }
  const double s = seconds() - t0;
  if (sink == 12345.0f) std::puts("");  // keeps the chains live
  return 2.0 * lanes * kChains * double(kIters) * threads / s / 1e9;
}

struct Form {
  std::string name;
  std::function<void()> run;
  std::vector<double> ms = {};  // one time per round
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int run(const Args& a) {
  if (!cpu::dnnl_available()) {
    std::puts("head_panels_bench: this build has no oneDNN; the panels are oneDNN's alone");
    return 0;
  }
  const int64_t n = a.rows, c = a.hidden, v = a.vocab;
  std::vector<float> x(size_t(n * c)), w(size_t(v * c)), dy(size_t(n * v)), logits(dy.size()),
      dx(x.size()), dw(w.size());
  std::mt19937 gen(30);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (auto* buf : {&x, &w, &dy})
    for (float& e : *buf) e = normal(gen);
  const int threads = cpu::gemm_threads();
  // One oneDNN call, the product as it was before the panels.
  auto one = [threads](bool ta, bool tb, int64_t m, int64_t nn, int64_t k, const float* pa,
                       int64_t lda, const float* pb, int64_t ldb, float* pc, int64_t ldc) {
    cpu::dnnl_matmul(ta, tb, m, nn, k, DType::f32, pa, lda, pb, ldb, nullptr, 1.0f, 0.0f,
                     DType::f32, pc, ldc, threads);
  };
  std::vector<Form> forms = {
      {"forward X W^T, one call",
       [&] { one(false, true, n, v, c, x.data(), c, w.data(), c, logits.data(), v); }},
      {"forward X W^T, gemm_f32",
       [&] {
         cpu::gemm_f32(false, true, n, v, c, 1.0f, x.data(), c, w.data(), c, 0.0f, logits.data(),
                       v);
       }},
      {"dX = dY W, one call",
       [&] { one(false, false, n, c, v, dy.data(), v, w.data(), c, dx.data(), c); }},
      {"dX = dY W, gemm_f32",
       [&] {
         cpu::gemm_f32(false, false, n, c, v, 1.0f, dy.data(), v, w.data(), c, 0.0f, dx.data(), c);
       }},
      {"dW = dY^T X, one call",
       [&] { one(true, false, v, c, n, dy.data(), v, x.data(), c, dw.data(), c); }},
      {"dW = dY^T X, gemm_f32",
       [&] {
         cpu::gemm_f32(true, false, v, c, n, 1.0f, dy.data(), v, x.data(), c, 0.0f, dw.data(), c);
       }},
  };
  for (Form& f : forms) f.run();  // oneDNN builds its primitives on a shape's first call
  for (int r = 0; r < a.rounds; ++r)
    for (Form& f : forms) {
      const double t0 = seconds();
      f.run();
      f.ms.push_back((seconds() - t0) * 1e3);
    }
  const CpuIsa isa = cpu_isa();
  const double peak = fma_rate(threads);
  const double flops = 2.0 * double(n) * double(c) * double(v);
  std::printf("rows %lld, hidden %lld, vocab %lld; %d threads; CPU level %s; %d rounds\n",
              (long long)n, (long long)c, (long long)v, threads, cpu_isa_name(isa), a.rounds);
  std::printf("multiply-add rate at this level: %.0f GFLOP/s on %d threads\n", peak, threads);
  std::puts("\n| form | min ms | median ms | max ms | GFLOP/s (median) | gemm_f32 / one call |");
  std::puts("|---|---|---|---|---|---|");
  for (size_t i = 0; i < forms.size(); ++i) {
    const Form& f = forms[i];
    const double med = median(f.ms);
    const auto [lo, hi] = std::minmax_element(f.ms.begin(), f.ms.end());
    char ratio[32] = "";
    if (i % 2 == 1) std::snprintf(ratio, sizeof ratio, "**%.2f**", med / median(forms[i - 1].ms));
    std::printf("| %s | %.1f | %.1f | %.1f | %.0f | %s |\n", f.name.c_str(), *lo, med, *hi,
                flops / (med * 1e-3) / 1e9, ratio);
  }
  return 0;
}

}  // namespace
}  // namespace fitgrad

int main(int argc, char** argv) { return fitgrad::run(fitgrad::parse(argc, argv)); }
