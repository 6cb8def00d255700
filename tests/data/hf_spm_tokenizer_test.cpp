// SentencePiece-style BPE (data/spm_tokenizer.h) against Hugging Face's `tokenizers` and the
// `sentencepiece` library: one SentencePiece BPE model (byte fallback, split digits) trained
// on Austen and converted by transformers 4.46.3 into the pipelines of Llama 2 (legacy
// Prepend + Replace, Strip), Mistral v0.3 (Metaspace "first") and Gemma (Replace only, no
// Strip), with special and added tokens carrying lstrip, rstrip, single_word and
// normalized (tests/golden/gen_hf_spm_tokenizer_golden.py). Every fixture gives `tokenizers`'
// ids and decoded text; the post-processor's BOS is the bos role; the same model as a GGUF
// file (tokenizer.ggml.model "llama", scores instead of merges) gives the `sentencepiece`
// library's ids; what the writer makes of each vocabulary reads back to the same ids; and the
// components fitgrad does not implement are errors naming them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "data/gguf_tokenizer.h"
#include "data/hf_tokenizer.h"
#include "data/spm_tokenizer.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kDir = std::string(FITGRAD_GOLDEN_DIR) + "/hf_tokenizers";
constexpr const char* kStyles[] = {"llama2_style", "mistral_style", "gemma_style"};

json read_json(const std::string& path) { return json::parse(std::ifstream(path)); }

json vocabulary_of(const std::string& style) {
  const std::string dir = kDir + "/" + style;
  return hf_tokenizer_vocabulary(dir + "/tokenizer.json",
                                 read_json(dir + "/tokenizer_config.json"));
}

std::unique_ptr<Tokenizer> load(const std::string& style) {
  return tokenizer_from_vocabulary(vocabulary_of(style), "[test]");
}

// Every fixture of `style` through `tok`: `tokenizers`' ids and decoded text.
void expect_fixtures(const Tokenizer& tok, const std::string& style) {
  const json fixtures = read_json(kDir + "/spm_fixtures.json");
  const json& want = fixtures.at(style);
  ASSERT_EQ(want.size(), fixtures.at("texts").size());
  for (size_t i = 0; i < want.size(); ++i) {
    const std::string text = fixtures.at("texts")[i];
    const std::vector<int32_t> ids = tok.encode(text, /*allow_special=*/true);
    EXPECT_EQ(ids, want[i].at("ids").get<std::vector<int32_t>>()) << style << ": [" << text << "]";
    EXPECT_EQ(tok.decode(want[i].at("ids").get<std::vector<int32_t>>()),
              want[i].at("decoded").get<std::string>())
        << style << ": [" << text << "]";
  }
}

TEST(HfSpmTokenizer, EveryFixtureGivesTheTokenizersIdsAndText) {
  for (const char* style : kStyles) expect_fixtures(*load(style), style);
}

TEST(HfSpmTokenizer, ThePostProcessorsBosIsTheBosRole) {
  const json fixtures = read_json(kDir + "/spm_fixtures.json");
  for (const char* style : kStyles) {
    const auto tok = load(style);
    const json& want = fixtures.at("with_bos").at(style);
    for (size_t i = 0; i < want.size(); ++i) {
      std::vector<int32_t> ids = {*tok->bos()};
      const std::vector<int32_t> body = tok->encode(fixtures.at("texts")[i].get<std::string>());
      ids.insert(ids.end(), body.begin(), body.end());
      EXPECT_EQ(ids, want[i].at("ids").get<std::vector<int32_t>>()) << style;
      EXPECT_EQ(tok->decode(ids), want[i].at("decoded").get<std::string>()) << style;
    }
  }
}

// A continuation keeps the space a text's start would lose (generation streams tokens).
TEST(HfSpmTokenizer, AContinuationKeepsItsLeadingSpace) {
  const auto tok = load("llama2_style");
  const std::vector<int32_t> ids = tok->encode("Emma was");
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(tok->decode(ids), "Emma was");
  EXPECT_EQ(tok->decode({ids[0]}) + tok->decode_continuation({ids.begin() + 1, ids.end()}),
            "Emma was");
  std::string spaced = " ";
  spaced += tok->decode({ids[0]});
  EXPECT_EQ(tok->decode_continuation({ids[0]}), spaced);
}

TEST(HfSpmTokenizer, AGgufSentencePieceVocabularyGivesTheSentencepieceIds) {
  const io::GgufFile file = io::GgufFile::open(kDir + "/llama2_style.gguf");
  const auto tok = tokenizer_from_gguf(file);
  const json fixtures = read_json(kDir + "/spm_fixtures.json");
  ASSERT_GE(fixtures.at("sentencepiece").size(), 10u);
  for (const json& entry : fixtures.at("sentencepiece")) {
    const std::string text = fixtures.at("texts")[entry.at("text_index").get<size_t>()];
    const std::vector<int32_t> ids = tok->encode(text);
    EXPECT_EQ(ids, entry.at("ids").get<std::vector<int32_t>>()) << "[" << text << "]";
    // Decoding gives the text back but for the first space and a literal "▁", a space.
    if (!text.starts_with(" ") && text.find("\xE2\x96\x81") == std::string::npos) {
      EXPECT_EQ(tok->decode(ids), text);
    }
  }
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
}

// hf_tokenizer_json (`fitgrad export`): each vocabulary, and the GGUF one, written as a
// tokenizer.json reads back to a tokenizer with the same ids on every fixture.
TEST(HfSpmTokenizer, WrittenTokenizerJsonReadsBackTheSame) {
  const fs::path out =
      fs::temp_directory_path() / ("written_spm_" + std::to_string(getpid()) + ".json");
  for (const char* style : kStyles) {
    std::ofstream(out) << hf_tokenizer_json(vocabulary_of(style)).dump();
    const json config = hf_tokenizer_config(vocabulary_of(style));
    expect_fixtures(
        *tokenizer_from_vocabulary(hf_tokenizer_vocabulary(out.string(), config), "[test]"), style);
  }
  const io::GgufFile file = io::GgufFile::open(kDir + "/llama2_style.gguf");
  std::ofstream(out) << hf_tokenizer_json(gguf_vocabulary(file)).dump();
  const auto from_json = tokenizer_from_vocabulary(hf_tokenizer_vocabulary(out.string()), "[t]");
  const auto from_gguf = tokenizer_from_gguf(file);
  const json fixtures = read_json(kDir + "/spm_fixtures.json");
  for (const json& text : fixtures.at("texts"))
    EXPECT_EQ(from_json->encode(text.get<std::string>(), true),
              from_gguf->encode(text.get<std::string>(), true))
        << text;
  fs::remove(out);
}

TEST(HfSpmTokenizer, UnsupportedComponentsAreNamed) {
  const std::string path = kDir + "/llama2_style/tokenizer.json";
  const fs::path bad =
      fs::temp_directory_path() / ("bad_spm_" + std::to_string(getpid()) + ".json");
  const auto expect_refused = [&](const std::function<void(json&)>& change,
                                  const std::string& part) {
    json j = read_json(path);
    change(j);
    std::ofstream(bad) << j.dump();
    fitgrad::testing::expect_error([&] { hf_tokenizer_vocabulary(bad.string()); },
                                   "[tokenizer " + bad.string() + "]", part);
  };
  expect_refused(
      [](json& j) {
        j["normalizer"] = {{"type", "NFKC"}};
      },
      "normalizer {\"type\":\"NFKC\"} is not supported");
  expect_refused(
      [](json& j) {
        j["decoder"]["decoders"][1] = {{"type", "CTC"}};
      },
      "decoder step {\"type\":\"CTC\"}");
  expect_refused(
      [](json& j) {
        j["pre_tokenizer"] = {{"type", "Metaspace"}, {"add_prefix_space", false}};
      },
      "add_prefix_space false and no prepend_scheme");
  expect_refused(
      [](json& j) {
        j["pre_tokenizer"] = {{"type", "Whitespace"}};
      },
      "pre_tokenizer {\"type\":\"Whitespace\"} is not supported");
  expect_refused([](json& j) { j["model"]["unk_token"] = "<nope>"; },
                 "model unk_token \"<nope>\" is not in the vocab");
  fs::remove(bad);
}

}  // namespace
}  // namespace fitgrad::data
