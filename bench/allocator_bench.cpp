// Allocator micro-benchmarks (issue: foundation). Three questions:
//   1. Is a cached alloc+free cheaper than malloc+free, on a realistic mixed-size
//      workload (a transformer-like step replayed) and at single sizes?
//   2. What does the ledger cost per event (the target is under 100 ns)?
//   3. What does entering a label scope cost?
// Memory is never touched, in both arms, so the numbers are bookkeeping alone.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <vector>

#include "tensor/memory/caching_allocator.h"
#include "tensor/memory/scope.h"

namespace fitgrad {
namespace {

// One training step of a GPT-2-small-shaped decoder (12 layers, B=4, T=512, C=768,
// 12 heads, f32, attention materialised as PyTorch's eager mode does), as the sequence
// of allocations and frees its activations make: forward saves per-layer tensors and
// makes temporaries; backward allocates each gradient, frees the saved tensor it used,
// then the gradient. Sizes run from 8 KiB (per-row norm stats) to 48 MiB (B*H*T*T).
struct Op {
  bool alloc;
  size_t size;  // for alloc
  int slot;     // which live slot it fills or frees
};

std::vector<Op> gpt2_step() {
  constexpr size_t B = 4, T = 512, C = 768, H = 12, f32 = 4;
  const size_t btc = B * T * C * f32, bt = B * T * f32, bhtt = B * H * T * T * f32;
  // Saved for backward, per layer: ln1 out, mean, rstd, qkv, softmax, attention out,
  // residual, ln2 out, mean, rstd, fc out, gelu out, residual.
  const size_t saved_sizes[] = {btc, bt, bt, 3 * btc, bhtt,    btc, btc,
                                btc, bt, bt, 4 * btc, 4 * btc, btc};
  // Temporaries, per layer: attention scores before softmax, projection outputs.
  const size_t temp_sizes[] = {bhtt, btc, btc};
  std::vector<Op> ops;
  int next_slot = 0;
  std::vector<std::pair<int, size_t>> saved;
  for (int layer = 0; layer < 12; ++layer) {
    for (size_t t : temp_sizes) ops.push_back({true, t, next_slot++});
    for (size_t sz : saved_sizes) {
      ops.push_back({true, sz, next_slot});
      saved.emplace_back(next_slot++, sz);
    }
    for (int k = 0; k < 3; ++k) ops.push_back({false, 0, next_slot - 13 - 3 + k});
  }
  while (!saved.empty()) {
    const auto [slot, size] = saved.back();
    saved.pop_back();
    const int grad = next_slot++;
    ops.push_back({true, size, grad});
    ops.push_back({false, 0, slot});
    ops.push_back({false, 0, grad});
  }
  return ops;
}

void BM_Gpt2Step_CachingAllocator(benchmark::State& state) {
  CachingAllocator a(Device::cpu(), make_host_source());
  const auto ops = gpt2_step();
  std::vector<Allocation> slots(ops.size());
  for (auto _ : state) {
    for (const Op& op : ops) {
      if (op.alloc) {
        slots[size_t(op.slot)] = a.allocate(op.size);
      } else {
        a.free(slots[size_t(op.slot)]);
      }
    }
  }
  state.SetItemsProcessed(int64_t(state.iterations() * ops.size()));
  state.counters["ns/op"] =
      benchmark::Counter(double(state.iterations() * ops.size()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_Gpt2Step_CachingAllocator)->Unit(benchmark::kMicrosecond);

void BM_Gpt2Step_Malloc(benchmark::State& state) {
  const auto ops = gpt2_step();
  std::vector<void*> slots(ops.size());
  for (auto _ : state) {
    for (const Op& op : ops) {
      if (op.alloc) {
        slots[size_t(op.slot)] = std::malloc(op.size);
        benchmark::DoNotOptimize(slots[size_t(op.slot)]);
      } else {
        std::free(slots[size_t(op.slot)]);
      }
    }
  }
  state.SetItemsProcessed(int64_t(state.iterations() * ops.size()));
  state.counters["ns/op"] =
      benchmark::Counter(double(state.iterations() * ops.size()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_Gpt2Step_Malloc)->Unit(benchmark::kMicrosecond);

// A single alloc+free pair of one size, repeated: the cache's best case, malloc's too.
void BM_AllocFree_CachingAllocator(benchmark::State& state) {
  CachingAllocator a(Device::cpu(), make_host_source());
  const auto size = size_t(state.range(0));
  for (auto _ : state) {
    Allocation x = a.allocate(size);
    benchmark::DoNotOptimize(x.ptr);
    a.free(x);
  }
}
BENCHMARK(BM_AllocFree_CachingAllocator)->Arg(512)->Arg(64 << 10)->Arg(4 << 20)->Arg(64 << 20);

void BM_AllocFree_Malloc(benchmark::State& state) {
  const auto size = size_t(state.range(0));
  for (auto _ : state) {
    void* p = std::malloc(size);
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
}
BENCHMARK(BM_AllocFree_Malloc)->Arg(512)->Arg(64 << 10)->Arg(4 << 20)->Arg(64 << 20);

// The ledger alone: one alloc event and one free event per iteration, so the time per
// iteration divided by two is the cost of one event (counts, label table, ring, clock).
void BM_LedgerEventPair(benchmark::State& state) {
  Ledger ledger;
  MemoryEvent e;
  e.category = Category::activation;
  e.label = intern_label("layers.3.mlp/silu");
  e.size = 4096;
  int64_t allocated = 0;
  for (auto _ : state) {
    allocated += 4096;
    ledger.record_alloc(e, allocated, 1 << 21);
    allocated -= 4096;
    ledger.record_free(e, allocated, 1 << 21);
  }
  state.counters["ns/event"] = benchmark::Counter(
      double(state.iterations() * 2), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_LedgerEventPair);

void BM_LabelScopeEnterExit(benchmark::State& state) {
  LabelScope outer("layers.3");
  for (auto _ : state) {
    LabelScope inner("mlp");
    benchmark::DoNotOptimize(current_memory_context().label);
  }
}
BENCHMARK(BM_LabelScopeEnterExit);

}  // namespace
}  // namespace fitgrad

BENCHMARK_MAIN();
