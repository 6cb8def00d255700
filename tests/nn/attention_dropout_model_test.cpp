// Attention dropout in a model (Note [Attention dropout] in nn/attention.cpp): a tiny GPT-2
// and a tiny grouped-query Llama with attn_pdrop 0.1, trained one step from one seed
// through the fused path (dropout inside flash attention) and the composed path
// (AttentionDropoutPathScope), give the same loss and parameter gradients to f32 rounding
// and leave the generator in the same state; and the ledger of the fused step holds no
// (B, H, T, T) activation: its peak is the peak of the same model without attention dropout,
// while the composed step allocates (B, H, T, T) activations.
#include <gtest/gtest.h>

#include <algorithm>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "nn/attention.h"
#include "nn/config.h"
#include "nn/decoder.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/random/generator.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::nn {
namespace {

using testing::all_close;
using testing::max_abs;
using testing::to_f64;

constexpr int64_t kB = 2, kT = 40;

Tensor tokens(uint64_t shift) {
  std::vector<int64_t> v(size_t(kB * kT));
  for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t((i * 37 + shift) % 256);
  return Tensor::from_vector(v, {kB, kT}, DType::i64);
}

struct Step {
  double loss;
  std::vector<std::vector<double>> grads;
  RngState after;
};

// One training step's loss and gradients from generator seed 41, on `path`.
Step step(const ModelConfig& cfg, AttentionDropoutPath path) {
  const std::unique_ptr<CausalLM> model = build_model(cfg, {.seed = 5});
  model->train();
  AttentionDropoutPathScope scope(path);
  default_generator().manual_seed(41);
  const Tensor loss = model->loss(tokens(0), tokens(1));
  autograd::backward(loss);
  Step s{loss.item(), {}, default_generator().state()};
  for (const Tensor& p : model->parameters()) s.grads.push_back(to_f64(autograd::grad(p)));
  return s;
}

ModelConfig with_attention_dropout(const std::string& name, double p) {
  ModelConfig cfg = preset(name);
  cfg.attn_pdrop = p;
  return cfg;
}

TEST(AttentionDropoutModel, FusedAndComposedPathsGiveTheSameStep) {
  for (const std::string name : {"gpt2-tiny", "llama-tiny"}) {
    SCOPED_TRACE(name);
    ModelConfig cfg = with_attention_dropout(name, 0.1);
    if (cfg.family == Family::gpt2) cfg.embd_pdrop = cfg.resid_pdrop = 0.1;  // GPT-2's defaults
    const Step fused = step(cfg, AttentionDropoutPath::fused);
    const Step composed = step(cfg, AttentionDropoutPath::composed);
    EXPECT_NEAR(fused.loss, composed.loss, 1e-5 * std::abs(composed.loss));
    EXPECT_EQ(fused.after, composed.after);
    ASSERT_EQ(fused.grads.size(), composed.grads.size());
    for (size_t i = 0; i < fused.grads.size(); ++i)
      EXPECT_TRUE(
          all_close(fused.grads[i], composed.grads[i], 1e-3, 1e-4 * max_abs(composed.grads[i])))
          << "parameter " << i;
    // The dropout acted: without it the loss differs.
    EXPECT_NE(step(with_attention_dropout(name, 0.0), AttentionDropoutPath::fused).loss,
              fused.loss);
  }
}

struct Ledger {
  int64_t peak = 0;
  int64_t probability_activations = 0;  // activation allocations of (B, H, T, T) f32 bytes
};

Ledger ledger_of(const ModelConfig& cfg, AttentionDropoutPath path) {
  CachingAllocator& alloc = allocator_for(Device::cpu());
  alloc.empty_cache();
  const int64_t base = alloc.stats().allocated_bytes[kAllPools].current;
  alloc.reset_peak_stats();
  const uint64_t first = alloc.total_events();
  step(cfg, path);
  Ledger l;
  l.peak = alloc.stats().allocated_bytes[kAllPools].peak - base;
  const uint64_t probs = uint64_t(round_request(size_t(kB * cfg.num_heads * kT * kT * 4)));
  for (const MemoryEvent& e : alloc.events())
    if (e.seq >= first && e.kind == EventKind::alloc && e.category == Category::activation &&
        e.size == probs)
      ++l.probability_activations;
  return l;
}

TEST(AttentionDropoutModel, FusedStepHoldsNoTByTActivation) {
  const ModelConfig cfg = with_attention_dropout("gpt2-tiny", 0.1);
  const Ledger plain =
      ledger_of(with_attention_dropout("gpt2-tiny", 0.0), AttentionDropoutPath::fused);
  const Ledger fused = ledger_of(cfg, AttentionDropoutPath::fused);
  const Ledger composed = ledger_of(cfg, AttentionDropoutPath::composed);
  EXPECT_EQ(fused.probability_activations, 0);
  EXPECT_EQ(fused.peak, plain.peak);
  EXPECT_GE(composed.probability_activations, 2 * cfg.num_layers);  // scores and probabilities
  EXPECT_GT(composed.peak, fused.peak);
}

}  // namespace
}  // namespace fitgrad::nn
