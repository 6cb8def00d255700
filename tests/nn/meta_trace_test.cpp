// A dry run on meta is the real run's exact double (Note [Meta plans for a target] in
// tensor/backend/profile.h): two AdamW steps of gpt2-tiny and llama-tiny, in fp32, bf16 and
// fp16 autocast, pure bf16, TF32, with checkpointing, with gradient accumulation and through
// the fused head's per-token log-probabilities (GRPO's), make on meta (planning for this
// machine's CPU) the same sequence of allocations and frees as on the CPU: kind (alloc, free,
// retag), size, requested bytes, category and label, event for event, and the same peak.
// A front-end that stages an input after deciding not to compute, or a workspace sized
// differently on meta, shows up here as the first differing event.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/autocast_cache.h"
#include "autograd/checkpoint.h"
#include "autograd/functions.h"
#include "autograd/tape.h"
#include "nn/config.h"
#include "nn/decoder.h"
#include "optim/adamw.h"
#include "tensor/backend/math_mode.h"
#include "tensor/backend/profile.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/memory/scope.h"
#include "tests/nn/allocation_events.h"

namespace fitgrad::testing {
namespace {

namespace ag = fitgrad::autograd;

struct TraceCase {
  std::string name;
  std::string preset;
  DType param_dtype = DType::f32;
  DType autocast = DType::f32;
  bool checkpointing = false;
  int64_t accumulation = 1;
  bool tf32 = false;  // TF32 matmuls: the staged GEMM's workspace (Note [TF32 on the CPU])
  // The per-token log-probabilities of the targets (CausalLM::token_logprobs, GRPO's) instead
  // of the mean cross-entropy, backpropagated from a constant gradient.
  bool token_logprobs = false;
};

std::vector<TraceCase> trace_cases() {
  std::vector<TraceCase> cases;
  for (const std::string preset : {"gpt2-tiny", "llama-tiny"}) {
    std::string p = preset;
    for (char& c : p)
      if (c == '-') c = '_';
    cases.push_back({p + "_fp32", preset});
    cases.push_back({p + "_bf16_autocast", preset, DType::f32, DType::bf16});
    cases.push_back({p + "_fp16_autocast", preset, DType::f32, DType::f16});
    cases.push_back({p + "_pure_bf16", preset, DType::bf16});
    cases.push_back({p + "_checkpointing", preset, DType::f32, DType::f32, true});
    cases.push_back({p + "_bf16_autocast_checkpointing", preset, DType::f32, DType::bf16, true});
    cases.push_back({p + "_accumulation_2", preset, DType::f32, DType::f32, false, 2});
    cases.push_back({p + "_tf32", preset, DType::f32, DType::f32, false, 1, true});
    cases.push_back({p + "_token_logprobs", preset, DType::f32, DType::f32, false, 1, false, true});
    cases.push_back({p + "_token_logprobs_bf16_autocast", preset, DType::f32, DType::bf16, false, 1,
                     false, true});
  }
  return cases;
}

struct TraceRun {
  std::vector<Seen> events;  // alloc and free
  int64_t peak = 0;          // allocated bytes at the peak, above the start
};

// Two optimizer steps of `c` on `device`, as the trainer takes them.
TraceRun train_two_steps(const TraceCase& c, Device device) {
  CachingAllocator& alloc = allocator_for(device);
  alloc.empty_cache();
  const int64_t base = alloc.stats().allocated_bytes[kAllPools].current;
  alloc.reset_peak_stats();
  const uint64_t first = alloc.total_events();
  {
    const nn::ModelConfig cfg = nn::preset(c.preset);
    const auto model = nn::build_model(cfg, {.device = device, .dtype = c.param_dtype, .seed = 7});
    if (c.checkpointing) model->set_checkpointing(ag::SegmentPlan::count(2));
    optim::AdamW opt({{model->named_parameters(), 0.1}}, {});
    const int64_t B = 2, T = 16;
    std::mt19937_64 rng(3);
    const backend::MatmulTf32Scope tf32(c.tf32);
    for (int step = 0; step < 2; ++step) {
      {
        ag::AutocastGuard autocast(c.autocast);
        ag::AutocastCacheScope weight_cache;  // as Trainer::train_step holds it
        for (int64_t m = 0; m < c.accumulation; ++m) {
          std::vector<int64_t> ids(size_t(B * (T + 1)));
          for (int64_t& id : ids) id = int64_t(rng() % uint64_t(cfg.vocab_size));
          const Tensor all = Tensor::from_vector(ids, {B, T + 1}, DType::i64).to(device);
          const Tensor x = all.narrow(1, 0, T).contiguous(), y = all.narrow(1, 1, T).contiguous();
          if (c.token_logprobs) {
            const Tensor logp = model->token_logprobs(x, y, 0.9);  // (B, T)
            ag::backward({logp}, {Tensor::full(logp.shape(), -0.5, DType::f32, device)});
            continue;
          }
          const Tensor loss = model->loss(x, y);
          ag::backward(c.accumulation > 1 ? ag::scale(loss, 1.0 / double(c.accumulation)) : loss);
        }
      }
      opt.step();
      model->zero_grad();
    }
  }
  TraceRun run;
  run.events = events_since(alloc, first);
  run.peak = alloc.stats().allocated_bytes[kAllPools].peak - base;
  return run;
}

class MetaTrace : public ::testing::TestWithParam<TraceCase> {};

TEST_P(MetaTrace, TwoStepsOnMetaAllocateExactlyAsOnTheCpu) {
  const TraceCase& c = GetParam();
  const backend::MetaTargetScope target(backend::host_cpu_profile());
  const TraceRun cpu = train_two_steps(c, Device::cpu());
  const TraceRun meta = train_two_steps(c, Device::meta());
  ASSERT_GT(cpu.events.size(), 100u);
  EXPECT_EQ(meta.peak, cpu.peak);
  const size_t n = std::min(cpu.events.size(), meta.events.size());
  for (size_t i = 0; i < n; ++i) {
    if (cpu.events[i] == meta.events[i]) continue;
    const Seen& a = cpu.events[i];
    const Seen& b = meta.events[i];
    FAIL() << "event " << i << " of " << cpu.events.size() << " differs: cpu "
           << (a.kind == EventKind::alloc ? "alloc " : "free ") << a.requested << " B "
           << category_name(a.category) << " '" << label_text(a.label) << "', meta "
           << (b.kind == EventKind::alloc ? "alloc " : "free ") << b.requested << " B "
           << category_name(b.category) << " '" << label_text(b.label) << "'";
  }
  EXPECT_EQ(meta.events.size(), cpu.events.size());
}

INSTANTIATE_TEST_SUITE_P(Configs, MetaTrace, ::testing::ValuesIn(trace_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace fitgrad::testing
