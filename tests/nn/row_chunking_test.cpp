// The fused head and loss and the tiled MLP in whole models (Note [Row-chunked head and
// MLP] in nn/decoder.h): the tiny GPT-2 (tied head) and the tiny Llama (its own head), with
// and without checkpointing, and a QLoRA Llama with LoRA on an NF4 head, each against the
// same model's plain step (loss and every gradient to 2e-5 relative: the chunked weight
// gradients are sums over chunks of the same products). The step's peak with both falls
// below the plain step's at a sequence where the logits dominate.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "nn/decoder.h"
#include "nn/lora.h"
#include "nn/nf4_linear.h"
#include "nn/target_modules.h"
#include "tensor/memory/caching_allocator.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::nn {
namespace {

namespace ag = fitgrad::autograd;

using fitgrad::testing::random_ids;

struct Step {
  double loss = 0;
  std::map<std::string, std::vector<double>> grads;
};

Step step(const CausalLM& m, const Tensor& ids, const Tensor& targets) {
  m.zero_grad();
  const Tensor loss = m.loss(ids, targets);
  ag::backward(loss);
  Step s{loss.item(), {}};
  for (const auto& [name, t] : m.trainable_parameters()) {
    const Tensor g = ag::grad(t);
    EXPECT_TRUE(g.defined()) << name << " got no gradient";
    if (g.defined()) s.grads[name] = g.to_vector<double>();
  }
  return s;
}

void expect_same_step(const Step& got, const Step& want, const std::string& what) {
  EXPECT_NEAR(got.loss, want.loss, 2e-5 * std::abs(want.loss)) << what;
  ASSERT_EQ(got.grads.size(), want.grads.size()) << what;
  for (const auto& [name, w] : want.grads) {
    const auto& g = got.grads.at(name);
    double scale = 0, worst = 0;
    for (double x : w) scale = std::max(scale, std::abs(x));
    for (size_t i = 0; i < w.size(); ++i) worst = std::max(worst, std::abs(g[i] - w[i]));
    EXPECT_LE(worst, 2e-5 * scale + 1e-9) << what << ": " << name;
  }
}

class RowChunkingTiny : public ::testing::TestWithParam<const char*> {};

TEST_P(RowChunkingTiny, FusedHeadAndTiledMlpGiveThePlainStep) {
  ModelConfig cfg = preset(GetParam());
  cfg.num_layers = 3;
  const auto m = build_model(cfg, {.seed = 4});
  const Tensor ids = random_ids(2, 24, cfg.vocab_size, 31);
  Tensor targets = random_ids(2, 24, cfg.vocab_size, 32);
  targets.data<int64_t>()[5] = -100;  // an ignored target counts in no chunk's mean
  const Step plain = step(*m, ids, targets);
  const std::vector<std::pair<std::string, RowChunking>> cases = {
      {"fused head, 7-row chunks", {true, 7, false, 0}},
      {"fused head, the rule", {true, 0, false, 0}},
      {"tiled MLP, 5 tiles", {false, 0, true, 5}},
      {"tiled MLP, the rule", {false, 0, true, 0}},
      {"both", {true, 10, true, 3}},
  };
  for (bool ckpt : {false, true}) {
    m->set_checkpointing(ckpt ? ag::SegmentPlan::count(3) : ag::SegmentPlan::none());
    for (const auto& [name, chunking] : cases) {
      m->set_row_chunking(chunking);
      expect_same_step(step(*m, ids, targets), plain,
                       std::string(GetParam()) + ", " + name + (ckpt ? ", checkpointed" : ""));
    }
  }
  m->set_row_chunking({});
  m->set_checkpointing(ag::SegmentPlan::none());
}

INSTANTIATE_TEST_SUITE_P(Nn, RowChunkingTiny, ::testing::Values("gpt2-tiny", "llama-tiny"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

TEST(RowChunking, QloraWithLoraOnAnNf4HeadGivesThePlainStep) {
  ModelConfig cfg = preset("llama-tiny");
  cfg.num_layers = 2;
  cfg.tie_word_embeddings = false;
  auto targets = std::make_shared<TargetModules>(
      TargetModules::names({"q_proj", "v_proj", "down_proj", "lm_head"}));
  BuildOptions o{.seed = 9};
  o.linear_factory = targeted_factory(targets, lora_factory({8, 16, 0.0, false}, nf4_factory({})),
                                      nf4_factory({}));
  const auto m = build_model(cfg, o);
  mark_only_lora_as_trainable(*m);
  // LoRA's B starts at zero, which would make A's gradients zero: give B values.
  for (auto [name, t] : m->trainable_parameters())
    if (name.find("lora_B") != std::string::npos) {
      std::vector<float> v(size_t(t.numel()));
      for (size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * float((i * 7) % 11) - 0.05f;
      t.copy_(Tensor::from_vector(v, t.shape(), DType::f32));
    }
  const Tensor ids = random_ids(2, 16, cfg.vocab_size, 41);
  const Tensor tg = random_ids(2, 16, cfg.vocab_size, 42);
  const Step plain = step(*m, ids, tg);
  ASSERT_TRUE(plain.grads.count("lm_head.lora_A.weight"));
  m->set_row_chunking({true, 6, true, 4});
  expect_same_step(step(*m, ids, tg), plain, "qlora, fused head and tiled MLP");
}

// At T = 256 with the tiny vocabulary (256) and hidden size (64) the (B T, V) logits and
// their gradient are the step's largest tensors; with the fused head they never exist.
TEST(RowChunking, TheFusedStepPeaksBelowThePlainStep) {
  ModelConfig cfg = preset("llama-tiny");
  cfg.num_layers = 2;
  cfg.max_position_embeddings = 512;
  const auto m = build_model(cfg, {.seed = 5});
  const Tensor ids = random_ids(4, 256, cfg.vocab_size, 51);
  const Tensor tg = random_ids(4, 256, cfg.vocab_size, 52);
  CachingAllocator& cpu = allocator_for(Device::cpu());
  auto peak = [&](const RowChunking& c) {
    m->set_row_chunking(c);
    step(*m, ids, tg);  // warm: the gradients exist from here on
    cpu.reset_peak_stats();
    const int64_t base = cpu.stats().allocated_bytes[0].current;
    step(*m, ids, tg);
    return cpu.stats().allocated_bytes[0].peak - base;
  };
  const int64_t plain = peak({}), fused = peak({true, 0, true, 0});
  const int64_t logits = 4 * 256 * cfg.vocab_size * 4;
  EXPECT_LE(fused + logits, plain) << "plain " << plain << ", fused " << fused;
  m->set_row_chunking({});
}

}  // namespace
}  // namespace fitgrad::nn
