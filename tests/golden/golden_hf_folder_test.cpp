// A Hugging Face model folder as transformers writes it (gen_hf_folder_golden.py): a tiny
// random Llama 3.1-style model (rope_scaling llama3) saved by save_pretrained in four shards
// with model.safetensors.index.json, and a tiny Qwen3 (per-head q/k norms) in three. `fitgrad` loads the folder as a --model spec (Note
// [Sharded model folders] in train/model_source.cpp) and must give transformers' logits, its
// greedy tokens through the KV cache, and one training step's loss and every parameter's
// gradient, under Note [Golden block tolerances] (transformers' own f32 logits are 2.5e-7
// normwise from its f64 ones here, meta "f64_err"). The same weights without the llama3
// scaling give other logits, so the scaling is what the match checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "nn/kv_cache.h"
#include "tests/golden/golden_compare.h"
#include "train/model_source.h"

namespace fitgrad::testing {
namespace {

namespace ag = fitgrad::autograd;

const std::string kFolder = golden_path("hf_llama31_tiny/model");

int64_t argmax_last(const Tensor& logits) {  // (1, T, V): the last position's top id
  const int64_t t = logits.size(1);
  const std::vector<float> row = logits.narrow(1, t - 1, 1).contiguous().to_vector<float>();
  return int64_t(std::max_element(row.begin(), row.end()) - row.begin());
}

// The folder tests/golden/<name>/model against <name>/golden.gtb: logits, the greedy tokens
// through the KV cache, the loss of ids[:, :-1] against ids[:, 1:] and every gradient;
// `params` parameters in all.
void expect_folder_matches_transformers(const std::string& name, size_t params) {
  const GoldenFile file(golden_path(name + "/golden.gtb"));
  const train::LoadedModel loaded = train::load_model(golden_path(name + "/model"), "", {});
  const nn::CausalLM& model = *loaded.model;
  EXPECT_NE(loaded.description.find("model.safetensors.index.json"), std::string::npos)
      << loaded.description;

  const Tensor ids = file.tensor("input_ids");  // (2, 40)
  Tensor logits;
  {
    ag::NoGradGuard no_grad;
    logits = model.forward(ids);
  }
  expect_matches_golden(file, "logits", logits, "logits");

  // Greedy decoding through the KV cache: the prompt in one call, then a token at a time.
  const Tensor prompt = file.tensor("prompt");  // (1, 6)
  const std::vector<int64_t> want = file.tensor("greedy").to_vector<int64_t>();
  nn::KvCache cache(model.config(), 1, prompt.size(1) + int64_t(want.size()));
  std::vector<int64_t> got;
  Tensor step = model.forward_cached(prompt, cache);
  for (size_t i = 0; i < want.size(); ++i) {
    got.push_back(argmax_last(step));
    step = model.forward_cached(
        Tensor::from_vector(std::vector<int64_t>{got.back()}, {1, 1}, DType::i64), cache);
  }
  EXPECT_EQ(got, want);

  const int64_t t = ids.size(1) - 1;
  const Tensor loss =
      model.loss(ids.narrow(1, 0, t).contiguous(), ids.narrow(1, 1, t).contiguous());
  ag::backward(loss);
  expect_matches_golden(file, "loss", loss, "loss");
  size_t checked = 0;
  for (const auto& [param, p] : model.named_parameters()) {
    expect_matches_golden(file, param + ".grad", ag::grad(p), "grad." + param);
    ++checked;
  }
  EXPECT_EQ(checked, params);
}

TEST(GoldenHfFolder, ShardedLlama31FolderMatchesTransformers) {
  EXPECT_EQ(train::load_model(kFolder, "", {}).model->config().rope_scaling.type,
            RopeScaling::Type::llama3);
  expect_folder_matches_transformers("hf_llama31_tiny", 1 + 2 * 9 + 2);
}

// Qwen2 (transformers 4.46.3): q/k/v with biases (random here, zero at transformers' init),
// o_proj without, a tied head; 26 parameters (per layer 9 and the three biases).
TEST(GoldenHfFolder, ShardedQwen2FolderWithQkvBiasesMatchesTransformers) {
  const nn::ModelConfig cfg =
      train::load_model(golden_path("hf_qwen2_tiny/model"), "", {}).model->config();
  EXPECT_TRUE(cfg.attention_qkv_bias);
  EXPECT_FALSE(cfg.attention_out_bias);
  expect_folder_matches_transformers("hf_qwen2_tiny", 1 + 2 * 12 + 1);
}

// Qwen3 (transformers 4.51.3): q_norm and k_norm on each head before RoPE, head_dim 16 above
// hidden / heads, a tied head; 24 parameters (per layer 9 and the two q/k norms).
TEST(GoldenHfFolder, ShardedQwen3FolderMatchesTransformers) {
  const nn::ModelConfig cfg =
      train::load_model(golden_path("hf_qwen3_tiny/model"), "", {}).model->config();
  EXPECT_TRUE(cfg.qk_norm);
  EXPECT_EQ(cfg.resolved_head_dim(), 16);
  expect_folder_matches_transformers("hf_qwen3_tiny", 1 + 2 * 11 + 1);
}

// Mistral (transformers 4.46.3) with a sliding window of 7 over 40 positions and 18 greedy
// steps through the KV cache: each position sees itself and the 6 before it.
TEST(GoldenHfFolder, ShardedMistralFolderWithASlidingWindowMatchesTransformers) {
  EXPECT_EQ(train::load_model(golden_path("hf_mistral_tiny/model"), "", {})
                .model->config()
                .sliding_window,
            7);
  expect_folder_matches_transformers("hf_mistral_tiny", 1 + 2 * 9 + 2);
}

// Phi-3 (transformers 4.46.3): fused qkv_proj and gate_up_proj, longrope whose long list the
// 40 positions take and whose short list the 18 greedy ones take, a sliding window of 20.
TEST(GoldenHfFolder, ShardedPhi3FolderWithLongRopeMatchesTransformers) {
  const nn::ModelConfig cfg =
      train::load_model(golden_path("hf_phi3_tiny/model"), "", {}).model->config();
  EXPECT_TRUE(cfg.fused_projections);
  EXPECT_EQ(cfg.rope_scaling.type, RopeScaling::Type::longrope);
  EXPECT_NEAR(cfg.rope_scaling.attention_factor, std::sqrt(1 + std::log(4.0) / std::log(32.0)),
              1e-12);
  expect_folder_matches_transformers("hf_phi3_tiny", 1 + 2 * 6 + 2);
}

// Gemma 2 (transformers 4.46.3): Note [Gemma blocks], with soft caps that bite on the scores
// (1.0) and the logits (3.0), a sliding layer of 7 and a global one, a tied head.
TEST(GoldenHfFolder, ShardedGemma2FolderMatchesTransformers) {
  const nn::ModelConfig cfg =
      train::load_model(golden_path("hf_gemma2_tiny/model"), "", {}).model->config();
  EXPECT_TRUE(cfg.gemma);
  EXPECT_EQ(cfg.attn_logit_softcapping, 1.0);
  EXPECT_TRUE(cfg.layer_slides(0));
  EXPECT_FALSE(cfg.layer_slides(1));
  expect_folder_matches_transformers("hf_gemma2_tiny", 1 + 2 * 11 + 1);
}

// Gemma 3 (transformers 4.51.3, gemma3_text): q/k norms, a sliding layer with its own RoPE
// base and a global one with linear scaling.
TEST(GoldenHfFolder, ShardedGemma3FolderMatchesTransformers) {
  const nn::ModelConfig cfg =
      train::load_model(golden_path("hf_gemma3_tiny/model"), "", {}).model->config();
  EXPECT_TRUE(cfg.gemma && cfg.qk_norm);
  EXPECT_EQ(cfg.rope_local_theta, 10000.0);
  expect_folder_matches_transformers("hf_gemma3_tiny", 1 + 2 * 13 + 1);
}

// Gemma 3 as the Hub ships 4B and up (Note [Multimodal folders] in nn/text_config.cpp): that
// text model inside Gemma3ForConditionalGeneration with a SigLIP tower, its text_config holding
// only the keys off Gemma3TextConfig's defaults (rms_norm_eps, rope_theta and
// rope_local_base_freq left out). fitgrad reads the text model; text input gives the multimodal
// model's logits and its text parameters' gradients.
TEST(GoldenHfFolder, MultimodalGemma3FolderReadsAsItsTextModel) {
  const nn::ModelConfig cfg =
      train::load_model(golden_path("hf_gemma3_mm_tiny/model"), "", {}).model->config();
  EXPECT_EQ(cfg.model_type, "gemma3_text");
  EXPECT_EQ(cfg.rope_theta, 1e6);
  EXPECT_EQ(cfg.rope_local_theta, 10000.0);
  EXPECT_EQ(cfg.norm_eps, 1e-6);
  expect_folder_matches_transformers("hf_gemma3_mm_tiny", 1 + 2 * 13 + 1);
}

// The largest |logit - golden| of the folder tests/golden/<name>/model's weights in a model
// whose config `change` alters, and the largest |golden logit|.
std::pair<double, double> logit_error_with(const std::string& name,
                                           const std::function<void(nn::ModelConfig&)>& change) {
  const GoldenFile file(golden_path(name + "/golden.gtb"));
  train::LoadedModel loaded = train::load_model(golden_path(name + "/model"), "", {});
  nn::ModelConfig changed = loaded.model->config();
  change(changed);
  nn::BuildOptions options;
  options.initialize = false;
  const auto other = nn::build_model(changed, options);
  std::map<std::string, Tensor> state;
  for (const auto& [param, p] : loaded.model->named_parameters()) state.emplace(param, p);
  other->load(state, /*strict=*/true);
  ag::NoGradGuard no_grad;
  const std::vector<double> got = to_f64(other->forward(file.tensor("input_ids")));
  const std::vector<double> want = to_f64(file.tensor("logits"));
  double scale = 0, err = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(want[i]));
    err = std::max(err, std::fabs(got[i] - want[i]));
  }
  return {err, scale};
}

// Llama with dynamic NTK (factor 2) and YaRN (factor 4) scaling (transformers 4.46.3) over 40
// positions past max_position_embeddings 32, the greedy steps inside it.
TEST(GoldenHfFolder, DynamicAndYarnRopeScalingMatchTransformers) {
  EXPECT_EQ(train::load_model(golden_path("hf_llama_dynamic_tiny/model"), "", {})
                .model->config()
                .rope_scaling.type,
            RopeScaling::Type::dynamic);
  expect_folder_matches_transformers("hf_llama_dynamic_tiny", 1 + 2 * 9 + 2);
  const nn::ModelConfig yarn =
      train::load_model(golden_path("hf_llama_yarn_tiny/model"), "", {}).model->config();
  EXPECT_EQ(yarn.rope_scaling.type, RopeScaling::Type::yarn);
  EXPECT_NEAR(yarn.rope_scaling.attention_factor, 0.1 * std::log(4.0) + 1, 1e-12);
  expect_folder_matches_transformers("hf_llama_yarn_tiny", 1 + 2 * 9 + 2);
  for (const char* name : {"hf_llama_dynamic_tiny", "hf_llama_yarn_tiny"}) {
    const auto [err, scale] = logit_error_with(name, [](nn::ModelConfig& c) {
      c.rope_scaling = {};
      c.max_position_embeddings = 64;  // unscaled RoPE, over the same 40 positions
    });
    EXPECT_GT(err, 1e-4 * scale) << name;
  }
}

// Every family in bf16 (weights and activations, as `fitgrad eval --dtype bf16` runs them)
// against transformers' f32 logits: within 3e-2 of their scale, bf16's 8 bits of mantissa
// through two layers; and the f32 model is well inside it (1e-5, Note [Golden block
// tolerances]), so the bound says the bf16 path is the same model.
TEST(GoldenHfFolder, EveryFamilyInBf16IsWithinItsTolerance) {
  for (const char* name :
       {"hf_llama31_tiny", "hf_qwen2_tiny", "hf_qwen3_tiny", "hf_mistral_tiny", "hf_phi3_tiny",
        "hf_gemma2_tiny", "hf_gemma3_tiny", "hf_llama_yarn_tiny"}) {
    const GoldenFile file(golden_path(std::string(name) + "/golden.gtb"));
    nn::BuildOptions bf16;
    bf16.dtype = DType::bf16;
    const train::LoadedModel loaded =
        train::load_model(golden_path(std::string(name) + "/model"), "", bf16);
    ag::NoGradGuard no_grad;
    const std::vector<double> got =
        to_f64(loaded.model->forward(file.tensor("input_ids")).to(DType::f32));
    const std::vector<double> want = to_f64(file.tensor("logits"));
    double scale = 0, err = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      scale = std::max(scale, std::fabs(want[i]));
      err = std::max(err, std::fabs(got[i] - want[i]));
    }
    EXPECT_LT(err, 3e-2 * scale) << name;
    EXPECT_GT(err, 0.0) << name << ": not computed in bf16";
  }
}

// Note [Golden block tolerances] allows 1e-5 max|want| on the smallest logits: a config detail
// that matters moves them by ten times that or more.
TEST(GoldenHfFolder, WithoutTheLlama3ScalingTheLogitsDiffer) {
  // 9e-4 of the scale here: random weights of std 0.02 make the rotation's effect small
  const auto [err, scale] =
      logit_error_with("hf_llama31_tiny", [](nn::ModelConfig& c) { c.rope_scaling = {}; });
  EXPECT_GT(err, 1e-4 * scale);
}

TEST(GoldenHfFolder, WithTheShortLongRopeListTheLogitsDiffer) {
  const auto [err, scale] = logit_error_with("hf_phi3_tiny", [](nn::ModelConfig& c) {
    std::copy_n(c.rope_scaling.short_factor, c.rope_scaling.pairs, c.rope_scaling.long_factor);
  });
  EXPECT_GT(err, 1e-4 * scale);
}

TEST(GoldenHfFolder, WithoutGemmasSoftCapsOrLocalRopeBaseTheLogitsDiffer) {
  for (const auto& change : std::vector<std::function<void(nn::ModelConfig&)>>{
           [](nn::ModelConfig& c) { c.attn_logit_softcapping = 0; },
           [](nn::ModelConfig& c) { c.final_logit_softcapping = 0; }}) {
    const auto [err, scale] = logit_error_with("hf_gemma2_tiny", change);
    EXPECT_GT(err, 1e-4 * scale);
  }
  const auto [err, scale] =
      logit_error_with("hf_gemma3_tiny", [](nn::ModelConfig& c) { c.rope_local_theta = 0; });
  EXPECT_GT(err, 1e-4 * scale);
}

TEST(GoldenHfFolder, WithoutTheSlidingWindowTheLogitsDiffer) {
  const auto [err, scale] =
      logit_error_with("hf_mistral_tiny", [](nn::ModelConfig& c) { c.sliding_window = 0; });
  EXPECT_GT(err, 1e-4 * scale);
}

}  // namespace
}  // namespace fitgrad::testing
