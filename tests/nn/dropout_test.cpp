// Dropout as configured (Note [Dropout as configured] in nn/config.h): the config reader
// takes GPT-2's attn_pdrop, embd_pdrop and resid_pdrop (GPT2Config's default 0.1 when
// absent) and Llama's attention_dropout, and refuses a value it cannot honour; the composed
// attention with dropout (Note [Attention dropout]) equals an fp64 reference that applies the
// same Philox mask; and a model drops only in training mode, reproducibly for one seed.
#include "tensor/ops/dropout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "autograd/grad_mode.h"
#include "nn/attention.h"
#include "nn/config.h"
#include "nn/decoder.h"
#include "tensor/random/generator.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::nn {
namespace {

using ::testing::HasSubstr;
using testing::random_tensor;
using testing::to_f64;

nlohmann::json gpt2_json() {
  return {{"model_type", "gpt2"}, {"vocab_size", 256}, {"n_positions", 64},
          {"n_embd", 64},         {"n_layer", 2},      {"n_head", 4}};
}

nlohmann::json llama_json() {
  return {{"model_type", "llama"},    {"vocab_size", 256},
          {"hidden_size", 64},        {"intermediate_size", 176},
          {"num_hidden_layers", 2},   {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"max_position_embeddings", 64},
          {"rms_norm_eps", 1e-5}};
}

TEST(DropoutConfig, ReadsTheKeysWithHuggingFaceDefaults) {
  const ModelConfig absent = config_from_json(gpt2_json(), "test");
  EXPECT_EQ(absent.embd_pdrop, 0.1);
  EXPECT_EQ(absent.attn_pdrop, 0.1);
  EXPECT_EQ(absent.resid_pdrop, 0.1);

  nlohmann::json j = gpt2_json();
  j["embd_pdrop"] = 0.0, j["attn_pdrop"] = 0.25, j["resid_pdrop"] = 0.5;
  const ModelConfig set = config_from_json(j, "test");
  EXPECT_EQ(set.embd_pdrop, 0.0);
  EXPECT_EQ(set.attn_pdrop, 0.25);
  EXPECT_EQ(set.resid_pdrop, 0.5);
  EXPECT_EQ(config_from_json(config_to_json(set), "again"), set);

  EXPECT_EQ(config_from_json(llama_json(), "test").attn_pdrop, 0.0);
  nlohmann::json l = llama_json();
  l["attention_dropout"] = 0.125;
  const ModelConfig llama = config_from_json(l, "test");
  EXPECT_EQ(llama.attn_pdrop, 0.125);
  EXPECT_EQ(config_to_json(llama).at("attention_dropout"), 0.125);
  EXPECT_EQ(preset("gpt2").resid_pdrop, 0.1);  // openai-community/gpt2's config

  for (const double bad : {1.0, -0.1}) {
    nlohmann::json b = gpt2_json();
    b["attn_pdrop"] = bad;
    try {
      config_from_json(b, "bad.json");
      ADD_FAILURE() << "attn_pdrop " << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("attn_pdrop must be in [0, 1)"));
    }
  }
}

// The composed attention against an fp64 reference: softmax(q k^T / sqrt(D)) over the causal
// keys, times the dropout scale that ops::dropout draws for a tensor of ones of the
// probabilities' shape from the same generator state, times v. GQA: 4 query heads on 2 kv
// heads.
TEST(AttentionDropout, EqualsAnFp64ReferenceWithTheSamePhiloxMask) {
  const int64_t B = 2, H = 4, HKV = 2, G = H / HKV, T = 7, D = 8;
  const double p = 0.3;
  const Tensor q = random_tensor({B, H, T, D}, 1), k = random_tensor({B, HKV, T, D}, 2),
               v = random_tensor({B, HKV, T, D}, 3);
  Generator& gen = default_generator();
  gen.manual_seed(11);
  const RngState start = gen.state();
  const Tensor y = attention_with_dropout(q, k, v, p);
  gen.set_state(start);
  const std::vector<double> scale =
      to_f64(ops::dropout(Tensor::full({B, HKV, G, T, T}, 1.0), p, gen).y);

  const std::vector<double> qd = to_f64(q), kd = to_f64(k), vd = to_f64(v), got = to_f64(y);
  int64_t dropped = 0;
  double max_err = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        const int64_t kv = h / G;
        std::vector<double> s(size_t(i + 1));
        double top = -INFINITY, z = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += qd[size_t(((b * H + h) * T + i) * D + d)] *
                   kd[size_t(((b * HKV + kv) * T + j) * D + d)];
          s[size_t(j)] = dot / std::sqrt(double(D));
          top = std::max(top, s[size_t(j)]);
        }
        for (double& x : s) z += (x = std::exp(x - top));
        for (int64_t d = 0; d < D; ++d) {
          double out = 0;
          for (int64_t j = 0; j <= i; ++j) {
            const double m = scale[size_t((((b * HKV + kv) * G + h % G) * T + i) * T + j)];
            if (d == 0 && m == 0) ++dropped;
            out += s[size_t(j)] / z * m * vd[size_t(((b * HKV + kv) * T + j) * D + d)];
          }
          max_err = std::max(max_err, std::abs(out - got[size_t(((b * H + h) * T + i) * D + d)]));
        }
      }
  EXPECT_LT(max_err, 1e-5);
  EXPECT_GT(dropped, 0) << "no probability was dropped";
}

// The same initialised model twice: once with dropout 0.1 in its config, once without.
std::pair<std::unique_ptr<CausalLM>, std::unique_ptr<CausalLM>> twins(const std::string& name) {
  ModelConfig with = preset(name), without = preset(name);
  with.attn_pdrop = 0.1;
  if (with.family == Family::gpt2) with.embd_pdrop = with.resid_pdrop = 0.1;
  return {build_model(with, {.seed = 5}), build_model(without, {.seed = 5})};
}

TEST(ModelDropout, OnlyTrainingModeDropsAndOneSeedRepeatsIt) {
  for (const std::string name : {"gpt2-tiny", "llama-tiny"}) {
    auto [model, plain] = twins(name);
    const Tensor ids = Tensor::from_vector(std::vector<int64_t>{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8},
                                           {2, 6}, DType::i64);
    const Tensor targets = Tensor::from_vector(
        std::vector<int64_t>{1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9}, {2, 6}, DType::i64);
    autograd::NoGradGuard no_grad;
    const double reference = plain->loss(ids, targets).item();
    EXPECT_FALSE(model->training());
    EXPECT_EQ(model->loss(ids, targets).item(), reference) << name << ": eval mode dropped";

    model->train();
    default_generator().manual_seed(7);
    const double first = model->loss(ids, targets).item();
    default_generator().manual_seed(7);
    const double again = model->loss(ids, targets).item();
    const double next = model->loss(ids, targets).item();
    EXPECT_NE(first, reference) << name << ": training mode did not drop";
    EXPECT_EQ(first, again) << name << ": one seed, two results";
    EXPECT_NE(next, first) << name << ": the generator did not advance";
    model->eval();
    EXPECT_EQ(model->loss(ids, targets).item(), reference) << name;
  }
}

}  // namespace
}  // namespace fitgrad::nn
