// fp32 GEMM throughput (issue 3): fitgrad's gemm_f32 against OpenBLAS's cblas_sgemm, measured
// in the same run, at square sizes 512-4096 and at GPT-2-small training shapes with
// B*T = 4096 tokens (C = 768, 4C = 3072, 3C = 2304, vocabulary 50257), forward and both
// backward products (dX = dY W^T, dW = X^T dY). Three arms per shape:
//   openblas  cblas_sgemm called directly (the reference; absent when OpenBLAS is)
//   fitgrad   gemm_f32 with its default backend (Note [GEMM backend] in tensor/cpu/gemm.cpp)
//   eigen     gemm_f32 with the Eigen backend forced
// Each arm reports a GFLOP/s counter (2mnk per product, wall time: the GEMM is multithreaded)
// and the fitgrad/eigen arms a vs_openblas ratio; a Markdown table of all three closes the run.
// The target is fitgrad >= 0.9x OpenBLAS.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "tensor/cpu/gemm.h"

#ifdef FITGRAD_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace fitgrad::cpu {
namespace {

struct GemmShape {
  const char* name;
  bool ta, tb;
  int64_t m, n, k;
};

// (m,k) @ (k,n) with op() as flagged; names say which GPT-2 product the shape is.
const GemmShape kShapes[] = {
    {"square_512", false, false, 512, 512, 512},
    {"square_1024", false, false, 1024, 1024, 1024},
    {"square_2048", false, false, 2048, 2048, 2048},
    {"square_4096", false, false, 4096, 4096, 4096},
    {"qkv_fwd", false, false, 4096, 2304, 768},    // (4096,768) @ (768,2304)
    {"qkv_bwd_dx", false, true, 4096, 768, 2304},  // dY (4096,2304) @ W^T
    {"qkv_bwd_dw", true, false, 768, 2304, 4096},  // X^T (768,4096) @ dY
    {"fc_fwd", false, false, 4096, 3072, 768},     // (4096,768) @ (768,3072)
    {"fc_bwd_dx", false, true, 4096, 768, 3072},
    {"fc_bwd_dw", true, false, 768, 3072, 4096},
    {"proj_fwd", false, false, 4096, 768, 3072},  // (4096,3072) @ (3072,768)
    {"proj_bwd_dx", false, true, 4096, 3072, 768},
    {"proj_bwd_dw", true, false, 3072, 768, 4096},
    {"logits_fwd", false, false, 4096, 50257, 768},  // (4096,768) @ (768,50257)
    {"logits_bwd_dx", false, true, 4096, 768, 50257},
    {"logits_bwd_dw", true, false, 768, 50257, 4096},
};

enum class Arm { openblas, fitgrad, eigen };
const char* arm_name(Arm arm) {
  return arm == Arm::openblas ? "openblas" : arm == Arm::fitgrad ? "fitgrad" : "eigen";
}

// Values in [-1, 1) from a cheap pattern: the contents do not change the speed (no
// denormals), and filling a 800 MB logits buffer with a real RNG would dominate setup.
std::vector<float> pattern(int64_t n, int salt) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float((i * 7 + salt) % 64 - 32) / 32.0f;
  return v;
}

void bm_gemm(benchmark::State& state, GemmShape s, Arm arm) {
  const int64_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n, ldc = s.n;
  const std::vector<float> a = pattern(s.m * s.k, 1), b = pattern(s.k * s.n, 2);
  std::vector<float> c(size_t(s.m * s.n), 0.0f);
  const GemmBackend saved = gemm_backend();
  if (arm == Arm::eigen) set_gemm_backend(GemmBackend::eigen);
  for (auto _ : state) {
    if (arm == Arm::openblas) {
#ifdef FITGRAD_HAVE_OPENBLAS
      cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans,
                  blasint(s.m), blasint(s.n), blasint(s.k), 1.0f, a.data(), blasint(lda), b.data(),
                  blasint(ldb), 0.0f, c.data(), blasint(ldc));
#endif
    } else {
      gemm_f32(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), ldc);
    }
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_gemm_backend(saved);
  state.counters["GFLOP/s"] = benchmark::Counter(2e-9 * double(s.m) * double(s.n) * double(s.k),
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// Console output plus a vs_openblas counter: GFLOP/s over OpenBLAS's for the same shape and
// statistic (OpenBLAS runs first for each shape; 0 where there is nothing to compare), and a
// closing Markdown table. With --benchmark_repetitions=N the "max" aggregate is the best of N
// for GFLOP/s (for the time columns it is the slowest); the table uses it.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  // Colour only on a terminal, so redirected output stays plain text.
  RatioReporter() : ConsoleReporter(isatty(1) ? OO_ColorTabular : OO_Tabular) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    std::vector<Run> out = runs;
    for (Run& run : out) {
      const std::string name = run.run_name.function_name;  // gemm/<shape>/<arm>
      const size_t cut = name.rfind('/');
      const std::string shape = name.substr(0, cut), arm = name.substr(cut + 1);
      // "" for a plain run, else the aggregate (mean, median, max = best of N, ...).
      const std::string stat = run.run_type == Run::RT_Aggregate ? run.aggregate_name : "";
      const double gflops = run.counters["GFLOP/s"].value;
      run.counters["vs_openblas"] = 0.0;
      if (run.error_occurred || stat == "stddev" || stat == "cv") continue;
      auto& same_stat = gflops_[shape][stat];
      same_stat[arm] = gflops;
      if (same_stat.count("openblas")) run.counters["vs_openblas"] = gflops / same_stat["openblas"];
      if (std::find(order_.begin(), order_.end(), shape) == order_.end()) order_.push_back(shape);
    }
    ConsoleReporter::ReportRuns(out);
  }
  void print_table() {
    std::printf(
        "\n| shape | fitgrad GFLOP/s | eigen GFLOP/s | OpenBLAS GFLOP/s | fitgrad/OpenBLAS "
        "| eigen/OpenBLAS |\n|---|---|---|---|---|---|\n");
    for (const std::string& shape : order_) {
      // The best of N repetitions ("max") when there were several, else the single run.
      auto& g = gflops_[shape].count("max") ? gflops_[shape]["max"] : gflops_[shape][""];
      auto cell = [&](const char* arm) {
        return g.count(arm) ? fmt_num(g[arm], "%.1f") : std::string("-");
      };
      auto ratio = [&](const char* arm) {
        return g.count(arm) && g.count("openblas") ? fmt_num(g[arm] / g["openblas"], "%.2f")
                                                   : std::string("-");
      };
      std::printf("| %s | %s | %s | %s | %s | %s |\n", shape.c_str(), cell("fitgrad").c_str(),
                  cell("eigen").c_str(), cell("openblas").c_str(), ratio("fitgrad").c_str(),
                  ratio("eigen").c_str());
    }
  }

 private:
  static std::string fmt_num(double v, const char* f) {
    char buf[32];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
  }
  // shape -> statistic -> arm -> GFLOP/s
  std::map<std::string, std::map<std::string, std::map<std::string, double>>> gflops_;
  std::vector<std::string> order_;
};

}  // namespace
}  // namespace fitgrad::cpu

int main(int argc, char** argv) {
  using namespace fitgrad::cpu;
  benchmark::Initialize(&argc, argv);
  // --gemm_threads=N sets both libraries' thread count (default: every hardware thread).
  // One thread compares the kernels alone, and is less disturbed by other load on the machine.
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i], flag = "--gemm_threads=";
    if (arg.rfind(flag, 0) != 0) continue;
    set_gemm_threads(std::stoi(arg.substr(flag.size())));
    for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
    --argc;
    --i;
  }
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("gemm_default_backend", gemm_backend_name(gemm_backend()));
  benchmark::AddCustomContext("gemm_threads", std::to_string(gemm_threads()));
  benchmark::AddCustomContext("eigen_simd", Eigen::SimdInstructionSetsInUse());
#ifdef FITGRAD_HAVE_OPENBLAS
  benchmark::AddCustomContext("openblas_core", openblas_get_corename());
  benchmark::AddCustomContext("openblas_threads", std::to_string(openblas_get_num_threads()));
  const Arm arms[] = {Arm::openblas, Arm::fitgrad, Arm::eigen};
#else
  const Arm arms[] = {Arm::fitgrad};  // eigen would repeat fitgrad: it is the only backend
#endif
  for (const GemmShape& s : kShapes) {
    for (Arm arm : arms) {
      const std::string name = std::string("gemm/") + s.name + "/" + arm_name(arm);
      benchmark::RegisterBenchmark(name.c_str(), bm_gemm, s, arm)
          ->UseRealTime()
          ->ComputeStatistics(
              "max",
              [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); })
          ->Unit(benchmark::kMillisecond);
    }
  }
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_table();
  benchmark::Shutdown();
  return 0;
}
