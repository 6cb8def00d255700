// Attention with dropout on the CPU (issue 27): forward + backward through autograd of
// flash attention with dropout inside (Note [Dropout inside flash attention]), of the
// composed path it replaces in training (nn::attention_with_dropout: scores, softmax, dropout,
// P V, keeping (B, H, T, T) scores and probabilities), and of flash attention without
// dropout, at B = 1, H = 4, D = 64, causal, fp32, p = 0.1. Counter peak_MiB: the CPU
// allocator's allocated bytes at the iteration's peak above the inputs. A Markdown table
// with the composed/fused and fused/no-dropout time ratios closes the run.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>
#include <utility>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "nn/attention.h"
#include "tensor/memory/caching_allocator.h"

namespace fitgrad {
namespace {

namespace ag = fitgrad::autograd;

constexpr int64_t kBatch = 1, kHeads = 4, kDim = 64;
constexpr double kP = 0.1;

enum class Arm { fused, composed, no_dropout };
const char* arm_name(Arm a) {
  return a == Arm::fused ? "fused" : a == Arm::composed ? "composed" : "no_dropout";
}

Tensor pattern(const Shape& shape, int salt) {
  std::vector<float> v(size_t(numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(int64_t(i * 37 + salt) % 61 - 30) / 30.0f;
  return Tensor::from_vector(v, shape);
}

struct Row {
  double ms = 0, peak_mib = 0;
};
std::map<std::pair<int64_t, Arm>, Row>& results() {
  static std::map<std::pair<int64_t, Arm>, Row> rows;
  return rows;
}

void bm_attention(benchmark::State& state, Arm arm) {
  const int64_t t = state.range(0);
  const Shape shape{kBatch, kHeads, t, kDim};
  const Tensor q = pattern(shape, 1), k = pattern(shape, 2), v = pattern(shape, 3),
               w = pattern(shape, 4);
  for (const Tensor* x : {&q, &k, &v}) autograd::set_requires_grad(*x);
  CachingAllocator& alloc = allocator_for(Device::cpu());
  int64_t peak = 0;
  for (auto _ : state) {
    const int64_t base = alloc.stats().allocated_bytes[kAllPools].current;
    alloc.reset_peak_stats();
    const Tensor o = arm == Arm::composed
                         ? nn::attention_with_dropout(q, k, v, kP)
                         : ag::attention(q, k, v, true, 0, arm == Arm::fused ? kP : 0.0);
    autograd::backward(ag::sum(ag::mul(o, w)));
    benchmark::DoNotOptimize(autograd::grad(q).data_ptr());
    peak = alloc.stats().allocated_bytes[kAllPools].peak - base;
    for (const Tensor* x : {&q, &k, &v}) autograd::clear_grad(*x);
  }
  state.counters["peak_MiB"] = double(peak) / double(1 << 20);
  results()[{t, arm}].peak_mib = double(peak) / double(1 << 20);
}

// Records each run's real time per iteration for the closing table.
class TableReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.run_type != Run::RT_Iteration || run.iterations == 0) continue;
      const std::string name = run.benchmark_name();
      const int64_t t = std::stoll(name.substr(name.find('/') + 1));
      for (const Arm a : {Arm::fused, Arm::composed, Arm::no_dropout})
        if (name.rfind(std::string(arm_name(a)) + "/", 0) == 0)
          results()[{t, a}].ms = run.GetAdjustedRealTime();
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

void print_table() {
  std::printf(
      "\n| T | fused ms | composed ms | no-dropout ms | composed/fused | fused/no-dropout "
      "| fused peak MiB | composed peak MiB |\n|---|---|---|---|---|---|---|---|\n");
  for (const auto& [key, fused] : results()) {
    if (key.second != Arm::fused) continue;
    const Row composed = results()[{key.first, Arm::composed}];
    const Row plain = results()[{key.first, Arm::no_dropout}];
    std::printf("| %lld | %.1f | %.1f | %.1f | %.2fx | %.2fx | %.2f | %.2f |\n",
                (long long)key.first, fused.ms, composed.ms, plain.ms, composed.ms / fused.ms,
                fused.ms / plain.ms, fused.peak_mib, composed.peak_mib);
  }
}

}  // namespace
}  // namespace fitgrad

int main(int argc, char** argv) {
  using fitgrad::Arm;
  for (int64_t t : {256, 512, 1024}) {
    for (const Arm a : {Arm::fused, Arm::composed, Arm::no_dropout})
      benchmark::RegisterBenchmark(fitgrad::arm_name(a), fitgrad::bm_attention, a)
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
