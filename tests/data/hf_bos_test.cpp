// Note [The bos a text starts with] (data/hf_tokenizer.cpp) against transformers 4.46.3: for
// every tokenizer folder of tests/golden/hf_tokenizers/ (bos_fixtures.json, written by
// tests/golden/gen_hf_bos_golden.py: byte-level BPE with and without a template's BOS, Llama 3's
// Sequence post-processor, SentencePiece vocabularies of Llama 2, Mistral, Gemma and Phi-3's
// config) each path that turns a text into ids gives transformers' tokenizer(text)["input_ids"]:
// train::text_ids (generate --prompt, eval, --eval_prompts' raw prompts), a text corpus of one
// document (data/token_dataset.h) and a plain-text example (data/sft_encode.h); the tokenizer.json
// a vocabulary is exported as keeps it; and `generate` and `eval` on a model folder count it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/eval.h"
#include "apps/generate.h"
#include "data/gguf_tokenizer.h"
#include "data/hf_tokenizer.h"
#include "data/sft_encode.h"
#include "data/token_dataset.h"
#include "train/model_source.h"

namespace fitgrad::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kDir = std::string(FITGRAD_GOLDEN_DIR) + "/hf_tokenizers";

json read_json(const fs::path& path) { return json::parse(std::ifstream(path)); }

// The folder's vocabulary as a model folder reads it (its tokenizer_config.json when it has one).
json folder_vocabulary(const std::string& style) {
  const fs::path dir = fs::path(kDir) / style;
  return hf_tokenizer_vocabulary((dir / "tokenizer.json").string(),
                                 fs::exists(dir / "tokenizer_config.json")
                                     ? read_json(dir / "tokenizer_config.json")
                                     : json());
}

class HfBos : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("fitgrad_hf_bos_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  const json fixtures_ = read_json(fs::path(kDir) / "bos_fixtures.json");
};

TEST_F(HfBos, EveryPathStartsATextWithTheBosWhereTransformersDoes) {
  const std::vector<std::string> texts = fixtures_.at("texts");
  int with_bos = 0;
  for (const auto& [style, want] : fixtures_.items()) {
    if (style == "texts") continue;
    train::LoadedModel lm;
    lm.tokenizer_vocabulary = folder_vocabulary(style);
    lm.tokenizer = tokenizer_from_vocabulary(lm.tokenizer_vocabulary, "[test " + style + "]");
    const bool adds = vocabulary_adds_bos(lm.tokenizer_vocabulary);
    with_bos += adds ? 1 : 0;
    const SftEncoder encoder(*lm.tokenizer, nullptr, "test", {.add_bos = adds});
    for (size_t i = 0; i < texts.size(); ++i) {
      const auto ids = want.at("ids")[i].get<std::vector<int32_t>>();
      EXPECT_EQ(text_ids(*lm.tokenizer, lm.tokenizer_vocabulary, texts[i], /*allow_special=*/true),
                ids)
          << style << ": " << texts[i];
      SftExample example;
      example.format = SftFormat::text;
      example.text = texts[i];
      std::vector<int32_t> body = encoder.encode(example).ids;
      if (lm.tokenizer->eos() && !body.empty() && body.back() == *lm.tokenizer->eos())
        body.pop_back();  // TRL appends the eos to a text example
      EXPECT_EQ(body, ids) << style << " as a text example: " << texts[i];
    }
    // A corpus of one document: its stream is tokenizer(document).
    const fs::path doc = dir_ / (style + ".txt");
    std::ofstream(doc) << texts[0];
    TokenDatasetOptions o;
    o.cache_dir = (dir_ / "cache").string();
    o.val_fraction = 0;
    o.add_bos = adds;
    const TokenDataset ds = TokenDataset::open(doc.string(), *lm.tokenizer, "test-" + style, o);
    EXPECT_EQ(std::vector<int32_t>(ds.tokens().begin(), ds.tokens().end()),
              want.at("ids")[0].get<std::vector<int32_t>>())
        << style << " as a corpus";
    // Exported as tokenizer.json and tokenizer_config.json, the folder adds it alike.
    const fs::path out = dir_ / style / "tokenizer.json";
    fs::create_directories(out.parent_path());
    std::ofstream(out) << hf_tokenizer_json(lm.tokenizer_vocabulary).dump();
    EXPECT_EQ(vocabulary_adds_bos(hf_tokenizer_vocabulary(
                  out.string(), hf_tokenizer_config(lm.tokenizer_vocabulary))),
              adds)
        << style;
  }
  EXPECT_EQ(with_bos, 8);  // of 10 folders: every one but smollm_style and qwen2_style
}

// generate --prompt and eval on a model folder with Gemma's tokenizer count the bos as
// transformers' tokenizer(text) gives it.
TEST_F(HfBos, GenerateAndEvalCountTheBos) {
  const fs::path folder = dir_ / "gemma";
  fs::create_directories(folder);
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(fs::path(kDir) / "gemma_style" / name, folder / name);
  const json tokenizer = read_json(folder / "tokenizer.json");
  int64_t vocab = int64_t(tokenizer.at("model").at("vocab").size());
  for (const json& t : tokenizer.at("added_tokens"))
    vocab = std::max(vocab, t.at("id").get<int64_t>() + 1);
  std::ofstream(folder / "config.json")
      << json{{"model_type", "llama"},    {"vocab_size", vocab},
              {"hidden_size", 32},        {"intermediate_size", 64},
              {"num_hidden_layers", 1},   {"num_attention_heads", 2},
              {"num_key_value_heads", 1}, {"max_position_embeddings", 128},
              {"rms_norm_eps", 1e-5},     {"tie_word_embeddings", true}}
             .dump();
  const std::string text = fixtures_.at("texts")[0];
  const size_t want = fixtures_.at("gemma_style").at("ids")[0].size();
  apps::GenerateOptions g;
  g.model = (folder / "config.json").string();  // random weights, the folder's tokenizer
  g.prompt = text;
  g.max_new_tokens = 1;
  std::ostringstream sink;
  EXPECT_EQ(apps::generate(g, sink).prompt_tokens, int64_t(want));
  apps::EvalOptions e;
  e.model = g.model;
  e.data = (dir_ / "text.txt").string();
  std::ofstream(e.data) << text;
  e.seq_len = 64;
  EXPECT_EQ(apps::evaluate(e, sink).scored_tokens, int64_t(want) - 1);
}

}  // namespace
}  // namespace fitgrad::data
