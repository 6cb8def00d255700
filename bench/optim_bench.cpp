// Optimizer step micro-benchmarks: AdamW, Adam8bit and both Adafactors' steps on ~30M f32
// parameters, each against a plain unfused loop of the same arithmetic (optim_unfused.h);
// first written for AdamW.step on ~30M f32 parameters (GPT-2-small's
// 124M / 4, in a few tensors of transformer-like shapes), and clip_grad_norm on the same
// gradients. A step reads p, g, m, v and writes p, m, v, 28 bytes per element, so the
// "GB/s" counter is the memory traffic it sustains (Note [Optimizer kernels] in
// tensor/cpu/optim_update.cpp). Clipping is timed below max_norm, so it only reads the gradients
// (4 bytes per element). BM_SvdBasis times GaLore's SVD at GPT-2's and Llama's shapes.
#include <benchmark/benchmark.h>

#include <type_traits>

#include "autograd/variable.h"
#include "bench/optim_unfused.h"
#include "optim/adafactor.h"
#include "optim/adam8bit.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "tensor/ops/svd.h"
#include "tensor/random/generator.h"

namespace fitgrad::optim {
namespace {

// 29,908,992 f32 parameters: an embedding, 12 MLP projections (768 x 2048) and their biases.
std::vector<std::pair<std::string, Tensor>> params_30m() {
  std::vector<std::pair<std::string, Tensor>> out;
  const auto add = [&](const std::string& name, const Shape& shape) {
    Tensor p = Tensor::full(shape, 0.01);
    autograd::set_requires_grad(p);
    // Random gradients: the 8-bit codes then vary as in training (a constant would make
    // every block alike).
    autograd::ensure_meta(p).grad = default_generator().uniform(shape, -1e-3, 1e-3);
    out.emplace_back(name, p);
  };
  add("wte.weight", {14336, 768});
  for (int i = 0; i < 12; ++i) {
    add("h." + std::to_string(i) + ".c_fc.weight", {768, 2048});
    add("h." + std::to_string(i) + ".c_fc.bias", {2048});
  }
  return out;
}

int64_t numel_of(const std::vector<std::pair<std::string, Tensor>>& params) {
  int64_t n = 0;
  for (const auto& [name, p] : params) n += p.numel();
  return n;
}

void BM_AdamWStep30M(benchmark::State& state) {
  auto params = params_30m();
  AdamW opt(decay_groups(params, 0.1), {});
  opt.step();  // allocates the states outside the timed loop
  for (auto _ : state) opt.step();
  const double bytes = 28.0 * double(numel_of(params));
  state.counters["params"] = double(numel_of(params));
  state.counters["GB/s"] =
      benchmark::Counter(bytes * 1e-9 * double(state.iterations()), benchmark::Counter::kIsRate);
}

// GaLore's projection refresh (ops::svd_basis_, Note [GaLore's SVD on a card]): the rank-128
// basis of one (m, n) gradient, the side of min(m, n); "GFLOP/s" counts 4 m n min(m, n).
void BM_SvdBasis(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), r = 128;
  const Tensor g = default_generator().uniform({m, n}, -1e-3, 1e-3);
  const Tensor out = Tensor::empty(m < n ? Shape{m, r} : Shape{r, n});
  for (auto _ : state) ops::svd_basis_(g, out, m < n);
  const double flops = 4.0 * double(m) * double(n) * double(std::min(m, n));
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9 * double(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_ClipGradNorm30M(benchmark::State& state) {
  auto params = params_30m();
  std::vector<Tensor> tensors;
  for (const auto& [name, p] : params) tensors.push_back(p);
  // max_norm above the norm (~5.5): the norm pass alone, the common case.
  for (auto _ : state) benchmark::DoNotOptimize(clip_grad_norm(tensors, 1e3));
  state.counters["GB/s"] = benchmark::Counter(
      4e-9 * double(numel_of(params)) * double(state.iterations()), benchmark::Counter::kIsRate);
}

template <class Opt, class Options>
void BM_Step30M(benchmark::State& state) {
  auto params = params_30m();
  Opt opt(decay_groups(params, 0.1), Options{});
  opt.step();
  for (auto _ : state) opt.step();
  state.counters["ns/param"] =
      benchmark::Counter(double(numel_of(params)) * double(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// The same parameters through the plain unfused loops of optim_unfused.h, single-threaded
// as they are written (compare with the fused kernels at OMP_NUM_THREADS=1).
template <class Unfused>
void BM_Unfused30M(benchmark::State& state) {
  auto params = params_30m();
  std::vector<Unfused> opt(params.size());
  auto one_step = [&] {
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor& p = params[i].second;
      const Tensor g = autograd::grad(p);
      if constexpr (std::is_same_v<Unfused, bench::UnfusedAdafactor>) {
        const int64_t cols = p.shape().back(), rows = p.numel() / cols;
        opt[i].step(p.data<float>(), g.data<float>(), rows, cols, 1e-2f);
      } else {
        opt[i].step(p.data<float>(), g.data<float>(), p.numel(), 1e-3f, 0.1f);
      }
    }
  };
  one_step();
  for (auto _ : state) one_step();
  state.counters["ns/param"] =
      benchmark::Counter(double(numel_of(params)) * double(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

BENCHMARK(BM_AdamWStep30M)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Unfused30M<bench::UnfusedAdamW>)
    ->Name("BM_UnfusedAdamW30M")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Unfused30M<bench::UnfusedAdam8bit>)
    ->Name("BM_UnfusedAdam8bit30M")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Unfused30M<bench::UnfusedAdafactor>)
    ->Name("BM_UnfusedAdafactor30M")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Step30M<Adam8bit, Adam8bitOptions>)
    ->Name("BM_Adam8bitStep30M")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Step30M<Adafactor, AdafactorOptions>)
    ->Name("BM_AdafactorStep30M")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Step30M<AdafactorHF, AdafactorHFOptions>)
    ->Name("BM_AdafactorHfStep30M")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_ClipGradNorm30M)->Unit(benchmark::kMillisecond)->UseRealTime();
// GPT-2's attention and MLP matrices (as fitgrad stores them), and a Llama-7B MLP matrix at a
// quarter of each side.
BENCHMARK(BM_SvdBasis)
    ->Args({2304, 768})
    ->Args({768, 3072})
    ->Args({1024, 2752})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);

}  // namespace
}  // namespace fitgrad::optim

BENCHMARK_MAIN();
