// The 4-bit token embedding (nn/nf4_embedding.h), in a tied tiny Llama built with
// BuildOptions::quantized_embedding and loaded from a dense model's weights: its lookups,
// logits and the gradients of every other parameter equal those of the same dense model
// whose table is the dequantized one (exactly, above kMatvecRows rows; to f32 rounding for
// a decoding step); the table is no parameter but quantized_weight bytes at NF4's 4.127
// bits per value; loading refuses a misshaped table.
#include "nn/nf4_embedding.h"

#include <gtest/gtest.h>

#include <map>

#include "autograd/grad_mode.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "nn/config.h"
#include "nn/decoder.h"
#include "nn/kv_cache.h"
#include "nn/peft_load.h"
#include "tensor/memory/caching_allocator.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::nn {
namespace {

using testing::to_f64;

ModelConfig tied_tiny() {
  ModelConfig c = preset("llama-tiny");
  c.tie_word_embeddings = true;
  return c;
}

struct Pair {
  std::unique_ptr<CausalLM> quantized, reference;  // reference: dense, dequantized table
};

Pair make_pair() {
  const ModelConfig cfg = tied_tiny();
  const auto source = build_model(cfg, {.seed = 3});
  BuildOptions q;
  q.initialize = false;
  q.quantized_embedding = ops::FourBitOptions{};
  Pair p{build_model(cfg, q), build_model(cfg, {.seed = 4})};
  load_into_adapted(*p.quantized, source->state_dict());
  std::map<std::string, Tensor> state = source->state_dict();
  const Nf4Embedding* table = nullptr;
  for (const auto& [path, m] : p.quantized->named_modules())
    if (path == "model.embed_tokens") table = dynamic_cast<const Nf4Embedding*>(m);
  EXPECT_NE(table, nullptr);
  state["model.embed_tokens.weight"] = ops::dequantize_4bit(table->quantized(), DType::f32);
  p.reference->load(state);
  return p;
}

Tensor ids(int64_t b, int64_t t, int64_t salt) {
  std::vector<int64_t> v(size_t(b * t));
  for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t((i * 37 + size_t(salt)) % 256);
  return Tensor::from_vector(v, {b, t}, DType::i64);
}

TEST(Nf4Embedding, LogitsAndGradientsAreTheDenseModelsOnTheDequantizedTable) {
  const Pair p = make_pair();
  const Tensor x = ids(2, 9, 1), y = ids(2, 9, 2);
  {
    autograd::NoGradGuard no_grad;
    EXPECT_EQ(to_f64(p.quantized->forward(x)), to_f64(p.reference->forward(x)));
  }
  autograd::backward(p.quantized->loss(x, y));
  autograd::backward(p.reference->loss(x, y));
  std::map<std::string, Tensor> ref;
  for (const auto& [name, t] : p.reference->named_parameters()) ref[name] = t;
  for (const auto& [name, t] : p.quantized->named_parameters()) {
    ASSERT_TRUE(autograd::grad(t).defined()) << name;
    EXPECT_EQ(to_f64(autograd::grad(t)), to_f64(autograd::grad(ref.at(name)))) << name;
  }
}

TEST(Nf4Embedding, ADecodingStepReadsTheNibblesToF32Rounding) {
  const Pair p = make_pair();
  const ModelConfig& cfg = p.quantized->config();
  KvCache a(cfg, 1, 8, Device::cpu(), DType::f32), b(cfg, 1, 8, Device::cpu(), DType::f32);
  const Tensor prompt = ids(1, 5, 3), next = ids(1, 1, 4);
  p.quantized->forward_cached(prompt, a);
  p.reference->forward_cached(prompt, b);
  EXPECT_TRUE(testing::all_close(to_f64(p.quantized->forward_cached(next, a)),
                                 to_f64(p.reference->forward_cached(next, b)), 1e-4, 1e-5));
}

TEST(Nf4Embedding, TheTableIsQuantizedWeightNotAParameter) {
  CachingAllocator& alloc = allocator_for(Device::cpu());
  const int64_t before = alloc.by_category()[size_t(Category::quantized_weight)].current;
  BuildOptions q;
  q.quantized_embedding = ops::FourBitOptions{};
  const auto model = build_model(tied_tiny(), q);
  for (const auto& [name, t] : model->named_parameters())
    EXPECT_EQ(name.find("embed_tokens"), std::string::npos) << name;
  const int64_t bytes = alloc.by_category()[size_t(Category::quantized_weight)].current - before;
  const Nf4Embedding* table = nullptr;
  for (const auto& [path, m] : model->named_modules())
    if (path == "model.embed_tokens") table = dynamic_cast<const Nf4Embedding*>(m);
  ASSERT_NE(table, nullptr);
  // 4 bits + one 8-bit code per 64 + an f32 per 256 codes + the f32 offset; the ledger holds
  // those four tensors, each rounded up to the allocator's granule.
  const int64_t exact = table->quantized().nbytes();
  EXPECT_NEAR(8.0 * double(exact) / (256.0 * 64.0), 4.127, 0.01);
  EXPECT_GE(bytes, exact);
  EXPECT_LT(bytes, exact + 4 * 512);
}

TEST(Nf4Embedding, LoadingRefusesAMisshapedTable) {
  BuildOptions q;
  q.quantized_embedding = ops::FourBitOptions{};
  const auto model = build_model(tied_tiny(), q);
  std::map<std::string, Tensor> state = build_model(tied_tiny(), {.seed = 1})->state_dict();
  state["model.embed_tokens.weight"] = Tensor::zeros({255, 64});
  testing::expect_error([&] { load_into_adapted(*model, state); }, "[load]",
                        "expected a floating (256, 64), got f32 (255, 64)");
}

}  // namespace
}  // namespace fitgrad::nn
