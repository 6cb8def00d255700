// Decoding's matrix-vector products (issue 13): one row x (1, in) times a weight (out, in)
// at SmolLM2-135M's shapes, three ways, in the same run:
//   f32       ops::linear on the f32 weight (what `fitgrad generate` does without --quantize)
//   nf4       ops::linear_4bit reading the NF4 codes (Note [Four-bit matvec]), double-
//             quantized absmaxes as bitsandbytes' bnb_4bit_use_double_quant
//   nf4_deq   dequantize_4bit to f32 then ops::linear (the route a training step takes)
// l1_64x576 fits in L1 and shows the fixed cost of a call. Counters: GB/s of weight bytes
// read (f32: 4 per weight; nf4: the packed bytes and the absmax codes) and ns per weight.
// Run with OMP_NUM_THREADS=1 for the one-thread figures.
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "tensor/ops/matmul.h"
#include "tensor/ops/quantize.h"

namespace fitgrad {
namespace {

struct Shape2 {
  const char* name;
  int64_t out, in;
};

const Shape2 kShapes[] = {
    {"l1_64x576", 64, 576},
    {"q_proj_576x576", 576, 576},
    {"gate_proj_1536x576", 1536, 576},
    {"down_proj_576x1536", 576, 1536},
    {"tied_head_49152x576", 49152, 576},
};

enum class Arm { f32, nf4, nf4_deq };

Tensor uniform(int64_t rows, int64_t cols, uint64_t seed, double bound) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(float(-bound), float(bound));
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (float& f : v) f = d(rng);
  return Tensor::from_vector(v, {rows, cols}, DType::f32);
}

void run(benchmark::State& state, Shape2 s, Arm arm) {
  const Tensor w = uniform(s.out, s.in, 1, 0.05);
  const Tensor x = uniform(1, s.in, 2, 1.0);
  const ops::FourBit q = ops::quantize_4bit(w, {quant::FourBitType::nf4, 64, true});
  for (auto _ : state) {
    Tensor y;
    if (arm == Arm::f32) y = ops::linear(x, w, Tensor());
    if (arm == Arm::nf4) y = ops::linear_4bit(x, q);
    if (arm == Arm::nf4_deq) y = ops::linear(x, ops::dequantize_4bit(q, DType::f32), Tensor());
    benchmark::DoNotOptimize(y.data_ptr());
  }
  const double weights = double(s.out * s.in);
  const double bytes = arm == Arm::f32 ? 4.0 * weights : double(q.nbytes());
  state.counters["GB/s"] =
      benchmark::Counter(bytes * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  state.counters["ns/weight"] =
      benchmark::Counter(weights * double(state.iterations()) * 1e-9,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void register_all() {
  for (const Shape2& s : kShapes)
    for (const auto& [arm, name] :
         {std::pair{Arm::f32, "f32"}, {Arm::nf4, "nf4"}, {Arm::nf4_deq, "nf4_deq"}})
      benchmark::RegisterBenchmark((std::string("matvec/") + s.name + "/" + name).c_str(),
                                   [s, arm = arm](benchmark::State& st) { run(st, s, arm); })
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
}

}  // namespace
}  // namespace fitgrad

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  fitgrad::register_all();
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
