// The tiny GPT-2 and tiny Llama end to end: forward shapes, a loss that falls under a few
// manual SGD steps on a fixed batch, checkpointed gradients (per block and sqrt(L)
// segments) bitwise equal to the plain ones, deterministic initialisation, load() and its
// errors, a dry run of a 7B model on meta, and activations labelled by module.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "autograd/grad_mode.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "nn/decoder.h"
#include "tensor/error.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/ops/elementwise.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::nn {
namespace {

namespace ag = fitgrad::autograd;

using fitgrad::testing::random_ids;

using fitgrad::testing::error_of;

// The loss of (ids, targets) and every parameter's gradient after one backward.
struct LossAndGrads {
  float loss;
  std::map<std::string, std::vector<float>> grads;
};

LossAndGrads loss_and_grads(const CausalLM& m, const Tensor& ids, const Tensor& targets) {
  m.zero_grad();
  const Tensor loss = m.loss(ids, targets);
  ag::backward(loss);
  LossAndGrads r{float(loss.item()), {}};
  for (const auto& [name, t] : m.named_parameters()) {
    const Tensor g = ag::grad(t);
    EXPECT_TRUE(g.defined()) << name << " got no gradient";
    if (g.defined()) r.grads[name] = g.to_vector<float>();
  }
  return r;
}

class ModelTiny : public ::testing::TestWithParam<const char*> {};

TEST_P(ModelTiny, ForwardShapesAndLossNearLogV) {
  const ModelConfig cfg = preset(GetParam());
  const auto m = build_model(cfg, {.seed = 1});
  const Tensor ids = random_ids(2, 16, cfg.vocab_size, 7);
  const Tensor logits = m->forward(ids);
  EXPECT_EQ(logits.shape(), (Shape{2, 16, cfg.vocab_size}));
  EXPECT_EQ(logits.dtype(), DType::f32);
  // At init (std 0.02) the logits are small, so the loss is close to log(V).
  ag::NoGradGuard no_grad;
  const double loss = m->loss(ids, random_ids(2, 16, cfg.vocab_size, 8)).item();
  EXPECT_NEAR(loss, std::log(double(cfg.vocab_size)), 0.1);
  // Int32 ids work as well and give the same logits.
  const Tensor ids32 = ids.to(DType::i32);
  EXPECT_EQ(m->forward(ids32).to_vector<float>(), m->forward(ids).to_vector<float>());
}

TEST_P(ModelTiny, SgdStepsLowerTheLossOnAFixedBatch) {
  const ModelConfig cfg = preset(GetParam());
  const auto m = build_model(cfg, {.seed = 2});
  const Tensor ids = random_ids(2, 32, cfg.vocab_size, 11);
  const Tensor targets = random_ids(2, 32, cfg.vocab_size, 12);
  const double lr = 0.02;
  std::vector<double> losses;
  for (int step = 0; step < 6; ++step) {
    m->zero_grad();
    const Tensor loss = m->loss(ids, targets);
    losses.push_back(loss.item());
    ag::backward(loss);
    ag::NoGradGuard no_grad;
    for (Tensor p : m->parameters()) ops::add_(p, ops::scale(ag::grad(p), -lr));  // p -= lr g
  }
  for (size_t i = 1; i < losses.size(); ++i)
    EXPECT_LT(losses[i], losses[i - 1]) << GetParam() << " step " << i;
  EXPECT_LT(losses.back(), losses.front() - 0.2) << GetParam();  // 5.55 -> 5.18 / 5.31
}

TEST_P(ModelTiny, CheckpointedGradientsAreBitwiseThePlainOnes) {
  ModelConfig cfg = preset(GetParam());
  cfg.num_layers = 4;  // sqrt(4) = 2 segments of 2 blocks
  const auto m = build_model(cfg, {.seed = 3});
  const Tensor ids = random_ids(2, 16, cfg.vocab_size, 21);
  const Tensor targets = random_ids(2, 16, cfg.vocab_size, 22);
  const LossAndGrads plain = loss_and_grads(*m, ids, targets);
  for (const auto& plan : {ag::SegmentPlan::count(4), ag::SegmentPlan::sqrt_blocks(),
                           ag::SegmentPlan::per_block({0, -1, 1, 1})}) {
    m->set_checkpointing(plan);
    const LossAndGrads ck = loss_and_grads(*m, ids, targets);
    EXPECT_EQ(ck.loss, plain.loss);
    ASSERT_EQ(ck.grads.size(), plain.grads.size());
    for (const auto& [name, g] : plain.grads)
      EXPECT_TRUE(ck.grads.at(name) == g) << GetParam() << " " << name << " differs";
  }
  m->set_checkpointing(ag::SegmentPlan::none());
}

TEST_P(ModelTiny, InitialisationIsDeterministicAndFollowsTheStyle) {
  const ModelConfig cfg = preset(GetParam());
  Generator g1(42), g2(42), g3(43), g_meta(42);
  const auto a = build_model(cfg, {.generator = &g1});
  const auto b = build_model(cfg, {.generator = &g2});
  const auto c = build_model(cfg, {.generator = &g3});
  // A dry run on meta reserves exactly the draws of the real build.
  const auto d = build_model(cfg, {.device = Device::meta(), .generator = &g_meta});
  EXPECT_EQ(g_meta.state(), g1.state());
  const auto pa = a->named_parameters(), pb = b->named_parameters(), pc = c->named_parameters();
  bool any_differs = false;
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].second.to_vector<float>(), pb[i].second.to_vector<float>()) << pa[i].first;
    any_differs |= pa[i].second.to_vector<float>() != pc[i].second.to_vector<float>();
  }
  EXPECT_TRUE(any_differs);
  // Sample std of every weight matrix: 0.02, and GPT-2's residual projections 0.02/sqrt(2L).
  for (const auto& [name, t] : pa) {
    const auto v = t.to_vector<float>();
    double sum = 0, sq = 0;
    for (float x : v) sum += x, sq += double(x) * x;
    const double mean = sum / double(v.size()), sd = std::sqrt(sq / double(v.size()) - mean * mean);
    if (t.dim() == 2) {
      const bool residual = cfg.family == Family::gpt2 && name.ends_with("c_proj.weight");
      const double want = residual ? 0.02 / std::sqrt(2.0 * double(cfg.num_layers)) : 0.02;
      EXPECT_NEAR(sd, want, 0.1 * want) << name;
      EXPECT_NEAR(mean, 0.0, 0.1 * want) << name;
    } else if (name.ends_with("bias")) {
      EXPECT_EQ(sd, 0.0) << name;
      EXPECT_EQ(mean, 0.0) << name;
    } else {  // norm weights
      EXPECT_EQ(mean, 1.0) << name;
      EXPECT_EQ(sd, 0.0) << name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Nn, ModelTiny, ::testing::Values("gpt2-tiny", "llama-tiny"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(ModelLoad, CopiesByNameAndKeepsTheLeaves) {
  const ModelConfig cfg = preset("llama-tiny");
  const auto src = build_model(cfg, {.seed = 5});
  const auto dst = build_model(cfg, {.seed = 6});
  const Tensor before = dst->parameter("model.layers.1.mlp.up_proj.weight");
  dst->load(src->state_dict());
  EXPECT_TRUE(dst->parameter("model.layers.1.mlp.up_proj.weight").same(before));
  for (const auto& [name, t] : src->named_parameters())
    EXPECT_EQ(dst->parameter(name).to_vector<float>(), t.to_vector<float>()) << name;
  const Tensor ids = random_ids(1, 8, cfg.vocab_size, 3);
  EXPECT_EQ(dst->forward(ids).to_vector<float>(), src->forward(ids).to_vector<float>());
  // Floating dtypes convert (a bf16 checkpoint into f32 parameters).
  std::map<std::string, Tensor> bf16;
  for (const auto& [name, t] : src->named_parameters()) bf16[name] = t.to(DType::bf16);
  dst->load(bf16);
  const Tensor w = dst->parameter("model.embed_tokens.weight");
  EXPECT_EQ(w.dtype(), DType::f32);
  EXPECT_EQ(w.to_vector<float>(), bf16.at("model.embed_tokens.weight").to_vector<float>());
}

TEST(ModelLoad, ErrorsNameEveryMissingUnexpectedAndMismatchedEntry) {
  const ModelConfig cfg = preset("gpt2-tiny");
  const auto m = build_model(cfg, {.seed = 7});
  const auto original = m->parameter("transformer.ln_f.weight").to_vector<float>();
  auto state = build_model(cfg, {.seed = 8})->state_dict();
  state.erase("transformer.h.1.mlp.c_fc.bias");
  state["transformer.h.9.attn.c_attn.weight"] = Tensor::zeros({64, 192});
  state["transformer.h.0.attn.c_attn.weight"] = Tensor::zeros({192, 64});  // transposed
  state["transformer.h.0.ln_1.bias"] = Tensor::zeros({64}, DType::i64);
  const std::string msg = error_of([&] { m->load(state); });
  EXPECT_NE(msg.find("[load model]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1 missing:\n    transformer.h.1.mlp.c_fc.bias"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1 unexpected:\n    transformer.h.9.attn.c_attn.weight"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("transformer.h.0.attn.c_attn.weight: expected shape (64, 192), got (192, 64)"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("transformer.h.0.ln_1.bias: expected a floating dtype (f32), got i64"),
            std::string::npos)
      << msg;
  // Nothing was copied.
  EXPECT_EQ(m->parameter("transformer.ln_f.weight").to_vector<float>(), original);

  // Not strict: missing and unexpected entries are fine, mismatches are not.
  state.erase("transformer.h.0.ln_1.bias");
  EXPECT_NE(error_of([&] { m->load(state, false); }).find("expected shape (64, 192)"),
            std::string::npos);
  state.erase("transformer.h.0.attn.c_attn.weight");
  m->load(state, /*strict=*/false);
  EXPECT_EQ(m->parameter("transformer.ln_f.weight").to_vector<float>(),
            state.at("transformer.ln_f.weight").to_vector<float>());

  // A tied lm_head copy and GPT-2's causal-mask buffers are skipped even when strict.
  auto full = m->state_dict();
  full["lm_head.weight"] = full.at("transformer.wte.weight");
  full["transformer.h.0.attn.bias"] = Tensor::zeros({1, 1, 64, 64});
  EXPECT_NO_THROW(m->load(full));
  EXPECT_NE(error_of([&] { m->parameter("transformer.h.0.attn.bias"); }).find("no parameter"),
            std::string::npos);
}

TEST(ModelMeta, SevenBillionTrainingStepDryRunAllocatesNoBytes) {
  // Forward and backward of llama2-7b at B=1, T=32 on meta: every allocation is made with
  // its real size and label, no kernel runs, and no host memory is used.
  CachingAllocator& meta = allocator_for(Device::meta());
  CachingAllocator& host = allocator_for(Device::cpu());
  const int64_t host_before = host.stats().allocated_bytes[kAllPools].current;
  const auto m = build_model(preset("llama2-7b"), {.device = Device::meta()});
  const Tensor ids = Tensor::zeros({1, 32}, DType::i64, Device::meta());
  meta.reset_peak_stats();
  const Tensor loss = m->loss(ids, ids);
  EXPECT_EQ(loss.device(), Device::meta());
  EXPECT_EQ(loss.numel(), 1);
  std::map<std::string, int64_t> labels;
  for (const auto& [id, bytes] : meta.by_label()) labels[label_text(id)] += bytes;
  // Activations are labelled by module path (parameters by "<path>.weight").
  EXPECT_TRUE(labels.count("model.layers.31.mlp.gate_proj")) << "no activation of gate_proj";
  EXPECT_TRUE(labels.count("model.layers.0.self_attn.v_proj")) << "no activation of v_proj";
  EXPECT_TRUE(labels.count("model.embed_tokens")) << "no embedding output";
  ag::backward(loss);
  const Tensor g = ag::grad(m->parameter("model.layers.0.self_attn.q_proj.weight"));
  ASSERT_TRUE(g.defined());
  EXPECT_EQ(g.shape(), (Shape{4096, 4096}));
  EXPECT_EQ(g.device(), Device::meta());
  // 27 GB of parameters, their gradients and the activations: none of it on the host.
  EXPECT_LT(host.stats().allocated_bytes[kAllPools].current - host_before, int64_t(1) << 20);
  m->zero_grad();
}

TEST(ModelLabels, ActivationsCarryTheirModulePath) {
  // Under checkpointing too: the recompute runs under the segment's label.
  CachingAllocator& meta = allocator_for(Device::meta());
  const auto m = build_model(preset("gpt2-tiny"), {.device = Device::meta()});
  const Tensor ids = Tensor::zeros({2, 16}, DType::i64, Device::meta());
  for (const auto& plan : {ag::SegmentPlan::none(), ag::SegmentPlan::count(2)}) {
    m->set_checkpointing(plan);
    const Tensor loss = m->loss(ids, ids);
    std::set<std::string> labels;
    for (const auto& [id, bytes] : meta.by_label()) labels.insert(label_text(id));
    // Exact labels: activations carry the module path, parameters "<path>.weight".
    auto has_prefix = [&](const std::string& p) { return labels.count(p) > 0; };
    EXPECT_TRUE(has_prefix("transformer")) << "embeddings (token + position)";
    EXPECT_TRUE(has_prefix("transformer.ln_f")) << "final norm output";
    EXPECT_TRUE(has_prefix("lm_head")) << "logits";
    if (plan.kind == ag::SegmentPlan::Kind::none) {
      EXPECT_TRUE(has_prefix("transformer.h.1.attn.c_attn")) << "block activations";
      EXPECT_TRUE(has_prefix("transformer.h.0.mlp.c_fc")) << "block activations";
    }
    ag::backward(loss);
    m->zero_grad();
  }
}

TEST(ModelErrors, BadInputsAreNamed) {
  const auto m = build_model(preset("llama-tiny"));
  EXPECT_NE(error_of([&] {
              m->forward(Tensor::zeros({2, 8}));
            }).find("ids must be (B, T)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              m->forward(Tensor::zeros({1, 65}, DType::i64));
            }).find("exceeds max_position_embeddings = 64"),
            std::string::npos);
  ModelConfig bad = preset("llama-tiny");
  bad.num_kv_heads = 3;
  EXPECT_NE(error_of([&] { build_model(bad); }).find("num_kv_heads = 3"), std::string::npos);
}

}  // namespace
}  // namespace fitgrad::nn
