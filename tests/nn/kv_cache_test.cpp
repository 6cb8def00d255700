// The KV cache: logits from a prefill and then chunks or single tokens through
// CausalLM::forward_cached equal the logits of one full forward over the whole sequence,
// for GPT-2 (learned positions) and Llama with GQA (RoPE offsets), batch 2; and the cache
// refuses positions beyond its capacity with a clear error, without moving.
#include "nn/kv_cache.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

#include "autograd/grad_mode.h"
#include "nn/decoder.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/memory/scope.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::nn {
namespace {

using fitgrad::testing::all_close;
using fitgrad::testing::expect_error;

using fitgrad::testing::random_ids;

std::vector<double> as_doubles(const Tensor& t) { return t.contiguous().to_vector<double>(); }

struct CacheCase {
  const char* preset;
  std::vector<int64_t> chunks;  // the sequence is fed in chunks of these lengths
};

class KvCacheMatchesFullForward : public ::testing::TestWithParam<CacheCase> {};

TEST_P(KvCacheMatchesFullForward, LogitsOfEveryPosition) {
  const CacheCase& c = GetParam();
  const ModelConfig cfg = preset(c.preset);
  const auto model = build_model(cfg, {.seed = 3});
  int64_t t = 0;
  for (int64_t n : c.chunks) t += n;
  const int64_t b = 2;
  const Tensor ids = random_ids(b, t, cfg.vocab_size, 11);
  autograd::NoGradGuard no_grad;
  const Tensor full = model->forward(ids);  // (B, T, V)

  KvCache cache(cfg, b, t);
  int64_t start = 0;
  for (int64_t n : c.chunks) {
    const Tensor logits = model->forward_cached(ids.narrow(1, start, n), cache);
    ASSERT_EQ(logits.shape(), (Shape{b, n, cfg.vocab_size}));
    EXPECT_TRUE(all_close(as_doubles(logits), as_doubles(full.narrow(1, start, n)), 1e-5, 1e-5))
        << c.preset << ": positions " << start << " .. " << start + n - 1;
    start += n;
    EXPECT_EQ(cache.length(), start);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Tiny, KvCacheMatchesFullForward,
    ::testing::Values(CacheCase{"gpt2-tiny", {7, 1, 1, 1, 1, 1}},
                      CacheCase{"gpt2-tiny", {5, 3, 4, 1, 51}},  // to the full context (64)
                      CacheCase{"llama-tiny", {7, 1, 1, 1, 1, 1}},
                      CacheCase{"llama-tiny", {5, 3, 4, 1, 51}},
                      CacheCase{"llama-tiny", {1, 1, 1, 1}}),  // no prefill at all
    [](const auto& info) {
      std::string name = info.param.preset;
      for (char& ch : name)
        if (ch == '-') ch = '_';
      return name + "_" + std::to_string(info.index);
    });

TEST(KvCache, RefusesPositionsBeyondItsCapacityAndStaysUsable) {
  const ModelConfig cfg = preset("llama-tiny");
  const auto model = build_model(cfg, {.seed = 3});
  KvCache cache(cfg, 1, 6);
  model->forward_cached(random_ids(1, 4, cfg.vocab_size, 1), cache);
  expect_error([&] { model->forward_cached(random_ids(1, 3, cfg.vocab_size, 2), cache); },
               "[kv_cache]", "3 new positions after 4 cached exceed the cache's capacity of 6");
  EXPECT_EQ(cache.length(), 4);
  model->forward_cached(random_ids(1, 2, cfg.vocab_size, 2), cache);
  EXPECT_EQ(cache.length(), 6);
  expect_error([&] { model->forward_cached(random_ids(1, 1, cfg.vocab_size, 3), cache); },
               "[kv_cache]", "exceed the cache's capacity of 6");
}

TEST(KvCache, RefusesACapacityBeyondTheContextAndAWrongBatch) {
  const ModelConfig cfg = preset("gpt2-tiny");
  expect_error([&] { KvCache(cfg, 1, cfg.max_position_embeddings + 1); }, "[kv_cache]",
               "exceeds the model's max_position_embeddings = 64");
  const auto model = build_model(cfg, {.seed = 3});
  KvCache cache(cfg, 2, 8);
  expect_error([&] { model->forward_cached(random_ids(1, 2, cfg.vocab_size, 1), cache); },
               "[gpt2-tiny]", "ids batch 1");
}

TEST(KvCache, BuffersAreAllocatedUpFrontUnderTheirLabels) {
  const ModelConfig cfg = preset("llama-tiny");
  CachingAllocator& alloc = allocator_for(Device::cpu());
  const int64_t other_before = alloc.by_category()[size_t(Category::other)].current;
  KvCache cache(cfg, 2, 16);
  // Per buffer (B 2, Hkv 2, 16, D 16) f32; 2 layers x (k, v).
  const int64_t buffer = 2 * 2 * 16 * 16 * 4;
  EXPECT_EQ(alloc.by_category()[size_t(Category::other)].current - other_before, 4 * buffer);
  std::map<std::string, int64_t> bytes;
  for (const auto& [label, n] : alloc.by_label()) bytes[label_text(label)] = n;
  for (const char* name :
       {"kv_cache.layers.0.k", "kv_cache.layers.0.v", "kv_cache.layers.1.k", "kv_cache.layers.1.v"})
    EXPECT_EQ(bytes[name], buffer) << name;
  // Decoding allocates no more cache memory: the labels keep their bytes.
  const auto model = build_model(cfg, {.seed = 3});
  model->forward_cached(random_ids(2, 5, cfg.vocab_size, 1), cache);
  for (const auto& [label, n] : alloc.by_label())
    if (label_text(label).starts_with("kv_cache")) {
      EXPECT_EQ(n, buffer) << label_text(label);
    }
}

}  // namespace
}  // namespace fitgrad::nn
