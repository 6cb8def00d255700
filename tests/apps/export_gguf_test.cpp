// `fitgrad export -o OUT.gguf` (Note [GGUF files written] in apps/export_gguf.cpp): a model
// trained from a user's folder (a Llama 3.1-style config with the golden byte-level
// tokenizer.json, or a Llama 2-style one with the golden SentencePiece tokenizer.json) written
// as GGUF reads back through fitgrad's GGUF loader with the checkpoint's logits (f32: to float
// rounding; q8_0: within the 8-bit blocks' error) and a tokenizer that gives `tokenizers`' ids
// on the golden fixtures; what has no GGUF form here is refused by name. (transformers'
// GGUF loader and the `gguf` package read these files too: bench/RESULTS.md.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "apps/export.h"
#include "autograd/grad_mode.h"
#include "data/bpe_tokenizer.h"
#include "data/hf_tokenizer.h"
#include "io/gguf.h"
#include "nn/config.h"
#include "tests/tensor/ops/op_harness.h"
#include "tests/train/train_fixture.h"
#include "train/model_source.h"

namespace fitgrad::apps::test_train {

using train::load_model;
using train::LoadedModel;
using train::TrainArgs;
namespace {

class ExportGguf : public TrainFixture {
 protected:
  // A 2-step checkpoint of a llama config (vocab, RoPE keys) beside the golden tokenizer
  // `style`; returns its directory.
  std::string checkpoint(const std::string& style, int64_t vocab, const std::string& rope) {
    const fs::path golden = fs::path(FITGRAD_GOLDEN_DIR) / "hf_tokenizers" / style;
    const fs::path folder = root_ / style;
    fs::create_directories(folder);
    std::ofstream(folder / "config.json")
        << R"({"model_type": "llama", "vocab_size": )" << vocab
        << R"(, "hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128,
          "rms_norm_eps": 1e-5, "tie_word_embeddings": false, )"
        << rope << "}";
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
      fs::copy_file(golden / f, folder / f);
    TrainArgs a = args(write_text("text.txt", 3001, 4), style + "_run");
    a.model = (folder / "config.json").string();
    a.max_steps = 2;
    a.save_steps = 2;
    EXPECT_EQ(train(a), 0);
    return (root_ / (style + "_run") / "checkpoint-2").string();
  }

  std::string export_to(const std::string& base, const std::string& name,
                        const std::string& dtype) {
    ExportArgs e;
    e.base = base;
    e.out = (root_ / name).string();
    e.dtype = dtype;
    std::ostringstream log;
    export_merged(e, log);
    return e.out;
  }
};

// max |a - b| / max |b| of two models' logits on the same ids.
double logit_error(const LoadedModel& a, const LoadedModel& b, const std::vector<int32_t>& ids) {
  autograd::NoGradGuard no_grad;
  const Tensor x = Tensor::from_vector(ids, {1, int64_t(ids.size())}, DType::i32);
  const std::vector<float> got = a.model->forward(x).to_vector<float>();
  const std::vector<float> want = b.model->forward(x).to_vector<float>();
  double err = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, double(std::fabs(got[i] - want[i])));
    scale = std::max(scale, double(std::fabs(want[i])));
  }
  return err / scale;
}

TEST_F(ExportGguf, ALlama31ModelWithItsByteLevelTokenizerReadsBack) {
  const std::string ckpt =
      checkpoint("llama3_style", 703,
                 R"("rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
          "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 64})");
  const LoadedModel trained = load_model(ckpt, "", {});
  const std::vector<int32_t> ids = trained.tokenizer->encode("It is a truth, 1811 <tool>", true);
  const LoadedModel f32 = load_model(export_to(ckpt, "m_f32.gguf", "f32"), "", {});
  EXPECT_EQ(f32.model->config().rope_scaling.type, RopeScaling::Type::llama3);
  EXPECT_LT(logit_error(f32, trained, ids), 1e-5);
  EXPECT_EQ(f32.tokenizer->encode("It is a truth, 1811 <tool>", true), ids);
  EXPECT_EQ(f32.tokenizer->eos(), trained.tokenizer->eos());

  const std::string q8 = export_to(ckpt, "m_q8.gguf", "q8_0");
  const io::GgufFile file = io::GgufFile::open(q8);
  EXPECT_EQ(file.info("blk.0.attn_q.weight").type, uint32_t(io::GgmlType::Q8_0));
  EXPECT_EQ(file.info("blk.0.attn_norm.weight").type, uint32_t(io::GgmlType::F32));
  EXPECT_EQ(file.metadata().get_string("tokenizer.ggml.pre"), "llama-bpe");
  EXPECT_LT(logit_error(load_model(q8, "", {}), trained, ids), 2e-2);
}

TEST_F(ExportGguf, ASentencePieceTokenizerBecomesALlamaVocabularyWithTheSameIds) {
  const std::string ckpt = checkpoint("llama2_style", 1006, R"("rope_theta": 10000.0)");
  const LoadedModel trained = load_model(ckpt, "", {});
  const std::string out = export_to(ckpt, "spm.gguf", "f16");
  EXPECT_EQ(io::GgufFile::open(out).metadata().get_string("tokenizer.ggml.model"), "llama");
  const LoadedModel back = load_model(out, "", {});
  const nlohmann::json fixtures = nlohmann::json::parse(
      std::ifstream(fs::path(FITGRAD_GOLDEN_DIR) / "hf_tokenizers" / "spm_fixtures.json"));
  for (const nlohmann::json& entry : fixtures.at("sentencepiece")) {
    const std::string text = fixtures.at("texts")[entry.at("text_index").get<size_t>()];
    EXPECT_EQ(back.tokenizer->encode(text), entry.at("ids").get<std::vector<int32_t>>()) << text;
  }
  EXPECT_LT(logit_error(back, trained, trained.tokenizer->encode("Emma was handsome")), 5e-3);
}

// A copy of the golden folder tests/golden/<name>/model with a 256-token byte-level
// tokenizer.json (each byte a token, no merges) and config.json changed by `change`; returns
// the copy's path.
std::string family_folder(const fs::path& root, const std::string& name,
                          const std::function<void(nlohmann::json&)>& change = {}) {
  const fs::path from = fs::path(FITGRAD_GOLDEN_DIR) / name / "model", to = root / name;
  fs::create_directories(to);
  for (const auto& entry : fs::directory_iterator(from))
    fs::copy_file(entry.path(), to / entry.path().filename());
  nlohmann::json vocabulary = {
      {"model", "bpe"},
      {"pre", "gpt2"},
      {"merges", nlohmann::json::array()},
  };
  for (int b = 0; b < 256; ++b) {
    vocabulary["tokens"].push_back(data::gpt2_bytes_to_unicode(std::string(1, char(b))));
    vocabulary["token_types"].push_back(1);
  }
  std::ofstream(to / "tokenizer.json") << data::hf_tokenizer_json(vocabulary).dump();
  std::ofstream(to / "tokenizer_config.json") << data::hf_tokenizer_config(vocabulary).dump();
  if (change) {
    nlohmann::json config = nlohmann::json::parse(std::ifstream(to / "config.json"));
    change(config);
    std::ofstream(to / "config.json", std::ios::trunc) << config.dump();
  }
  return to.string();
}

// Note [GGUF architectures]: each family's transformers-saved folder written as GGUF reads
// back with the folder's config and logits (40 positions: past Phi-3's window and its
// original context, past Gemma's windows). Gemma's query_pre_attn_scalar is set to head_dim,
// the scale llama.cpp applies.
TEST_F(ExportGguf, EveryFamilysFolderReadsBackFromItsGgufFile) {
  const auto head_dim_scale = [](nlohmann::json& c) { c["query_pre_attn_scalar"] = 8; };
  const std::vector<std::tuple<std::string, std::string, std::function<void(nlohmann::json&)>>>
      families = {
          {"hf_llama31_tiny", "llama", {}},
          {"hf_qwen2_tiny", "qwen2", {}},
          {"hf_qwen3_tiny", "qwen3", {}},
          {"hf_phi3_tiny", "phi3", {}},
          {"hf_gemma2_tiny", "gemma2", head_dim_scale},
          {"hf_gemma3_tiny", "gemma3", head_dim_scale},
          {"hf_gemma3_mm_tiny", "gemma3",
           [&](nlohmann::json& c) { head_dim_scale(c["text_config"]); }},
      };
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < 40; ++i) ids.push_back((i * 37 + 11) % 256);
  for (const auto& [name, arch, change] : families) {
    const std::string folder = family_folder(root_, name, change);
    const LoadedModel source = load_model(folder, "", {});
    const std::string out = export_to(folder, name + ".gguf", "f32");
    const io::GgufFile file = io::GgufFile::open(out);
    EXPECT_EQ(file.metadata().get_string("general.architecture"), arch) << name;
    const LoadedModel back = load_model(out, "", {});
    nn::ModelConfig want = source.model->config(), got = back.model->config();
    // GGUF holds the floats in f32 and the head dim only when it is not hidden / heads.
    EXPECT_NEAR(got.rope_scaling.attention_factor, want.rope_scaling.attention_factor, 1e-6);
    EXPECT_NEAR(got.norm_eps, want.norm_eps, 1e-12);
    EXPECT_EQ(got.resolved_head_dim(), want.resolved_head_dim());
    got.name = want.name;
    got.rope_scaling.attention_factor = want.rope_scaling.attention_factor;
    got.norm_eps = want.norm_eps;
    got.head_dim = want.head_dim;
    got.initializer_range = want.initializer_range;
    EXPECT_EQ(nn::config_to_json(got), nn::config_to_json(want)) << name;
    EXPECT_LT(logit_error(back, source, ids), 1e-5) << name;
  }
}

TEST_F(ExportGguf, WhatHasNoGgufFormHereIsRefusedByName) {
  const std::string gemma = family_folder(root_, "hf_gemma2_tiny");
  fitgrad::testing::expect_error([&] { export_to(gemma, "gemma2.gguf", "f32"); }, "[export]",
                                 "query_pre_attn_scalar is 16, but llama.cpp scales a 2-layer");
  fitgrad::testing::expect_error(
      [&] {
        export_to(std::string(FITGRAD_GOLDEN_DIR) + "/hf_llama31_tiny/model", "b.gguf", "f32");
      },
      "[export]", "has no vocabulary to write");
  fitgrad::testing::expect_error(
      [&] {
        export_to(std::string(FITGRAD_GOLDEN_DIR) + "/hf_llama31_tiny/model", "c.gguf", "q4");
      },
      "[export]", "--dtype for a .gguf must be f32, f16, bf16 or q8_0");
}

}  // namespace
}  // namespace fitgrad::apps::test_train
