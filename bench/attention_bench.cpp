// Attention forward + backward on the CPU (issue 3): flash attention (tiled, online softmax,
// O(T) memory) against naive attention (materialised (B, H, T, T) probabilities) at
// T = 256 ... 4096, B = 1, H = 4, D = 64, causal, fp32. One iteration is the forward and
// the backward of one op, as a training step runs them. Counters:
//   peak_MiB    the CPU allocator's allocated bytes at the iteration's peak, above what the
//               inputs already held (reset_peak_stats before each iteration)
//   saved_MiB   what the forward hands to the backward: o + lse for flash; o + the
//               probabilities for naive (what a composed autograd graph keeps)
//   GFLOP/s     4 T^2 D H (forward: two products) + 8 T^2 D H (backward: four), halved for
//               the causal mask, over wall time; flash recomputes more than this count
// A Markdown table of both arms closes the run.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <utility>

#include "tensor/memory/caching_allocator.h"
#include "tensor/ops/attention.h"

namespace fitgrad {
namespace {

constexpr int64_t kBatch = 1, kHeads = 4, kDim = 64;

Tensor pattern(const Shape& shape, int salt) {
  std::vector<float> v(size_t(numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(int64_t(i * 37 + salt) % 61 - 30) / 30.0f;
  return Tensor::from_vector(v, shape);
}

struct Row {
  double ms = 0, peak_mib = 0, saved_mib = 0;
};
std::map<std::pair<int64_t, bool>, Row>& results() {
  static std::map<std::pair<int64_t, bool>, Row> rows;
  return rows;
}

void bm_attention(benchmark::State& state, bool flash) {
  const int64_t t = state.range(0);
  const Shape shape{kBatch, kHeads, t, kDim};
  const Tensor q = pattern(shape, 1), k = pattern(shape, 2), v = pattern(shape, 3),
               dout = pattern(shape, 4);
  CachingAllocator& alloc = allocator_for(Device::cpu());
  const double mib = 1 << 20;
  int64_t peak = 0;
  const double saved = flash ? double(q.nbytes() + size_t(kBatch * kHeads * t) * 4)
                             : double(q.nbytes() + size_t(kBatch * kHeads * t * t) * 4);
  for (auto _ : state) {
    const int64_t base = alloc.stats().allocated_bytes[kAllPools].current;
    alloc.reset_peak_stats();
    if (flash) {
      const ops::AttentionOut out = ops::flash_attention(q, k, v, true);
      const ops::AttentionGrads g =
          ops::flash_attention_backward(dout, q, k, v, out.o, out.lse, true);
      benchmark::DoNotOptimize(g.dq.data_ptr());
    } else {
      const Tensor o = ops::naive_attention(q, k, v, true);
      const ops::AttentionGrads g = ops::naive_attention_backward(dout, q, k, v, true);
      benchmark::DoNotOptimize(g.dq.data_ptr());
      benchmark::DoNotOptimize(o.data_ptr());
    }
    peak = alloc.stats().allocated_bytes[kAllPools].peak - base;
  }
  const double flops = 12.0 * double(t) * double(t) * kDim * kHeads * kBatch / 2;
  state.counters["peak_MiB"] = double(peak) / mib;
  state.counters["saved_MiB"] = saved / mib;
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  Row& row = results()[{t, flash}];
  row.peak_mib = double(peak) / mib;
  row.saved_mib = saved / mib;  // row.ms comes from TableReporter
}

// Records each run's real time per iteration for the closing table.
class TableReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.run_type != Run::RT_Iteration || run.iterations == 0) continue;
      const bool flash = run.benchmark_name().rfind("flash", 0) == 0;
      const int64_t t = std::stoll(run.benchmark_name().substr(run.benchmark_name().find('/') + 1));
      results()[{t, flash}].ms = run.GetAdjustedRealTime();
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

void print_table() {
  std::printf(
      "\n| T | flash ms | naive ms | naive/flash time | flash peak MiB | naive peak MiB "
      "| flash saved MiB | naive saved MiB |\n|---|---|---|---|---|---|---|---|\n");
  for (const auto& [key, flash] : results()) {
    if (!key.second) continue;
    const auto it = results().find({key.first, false});
    const bool has_naive = it != results().end();
    const Row naive = has_naive ? it->second : Row{};
    if (has_naive)
      std::printf("| %lld | %.1f | %.1f | %.2fx | %.2f | %.2f | %.2f | %.2f |\n",
                  (long long)key.first, flash.ms, naive.ms, naive.ms / flash.ms, flash.peak_mib,
                  naive.peak_mib, flash.saved_mib, naive.saved_mib);
    else
      std::printf("| %lld | %.1f | - | - | %.2f | - | %.2f | - |\n", (long long)key.first, flash.ms,
                  flash.peak_mib, flash.saved_mib);
  }
}

}  // namespace
}  // namespace fitgrad

int main(int argc, char** argv) {
  using fitgrad::bm_attention;
  for (int64_t t : {256, 512, 1024, 2048, 4096}) {
    benchmark::RegisterBenchmark("flash", bm_attention, true)
        ->Arg(t)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark("naive", bm_attention, false)
        ->Arg(t)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  fitgrad::TableReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  fitgrad::print_table();
  return 0;
}
