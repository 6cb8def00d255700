// tokenizer.json (data/hf_tokenizer.h) against Hugging Face's `tokenizers` library: two
// tokenizers trained and saved by `tokenizers` with Llama 3's and SmolLM's pipelines
// (tests/golden/gen_hf_tokenizer_golden.py) give `tokenizers`' ids and decoded texts on every
// fixture (prose, contractions, digit runs, white space, Chinese, Russian, Arabic, emoji,
// special and added tokens in the text); ignore_merges decides whole words as it does there;
// the roles come from tokenizer_config.json or the post-processor; GPT-2's own files, written
// as a tokenizer.json, encode Austen exactly as the GPT-2 tokenizer does; and every component
// fitgrad does not implement is an error naming it.
#include "data/hf_tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "data/bpe_tokenizer.h"
#include "data/gguf_tokenizer.h"
#include "tests/data/tokenizer_assets.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kDir = std::string(FITGRAD_GOLDEN_DIR) + "/hf_tokenizers";

json read_json(const std::string& path) { return json::parse(std::ifstream(path)); }

std::unique_ptr<Tokenizer> load(const std::string& path, const json& config = nullptr) {
  return tokenizer_from_vocabulary(hf_tokenizer_vocabulary(path, config), "[test]");
}

TEST(HfTokenizer, EveryFixtureGivesTheTokenizersIdsAndText) {
  const json fixtures = read_json(kDir + "/fixtures.json");
  for (const char* style : {"llama3_style", "smollm_style", "qwen2_style"}) {
    const std::unique_ptr<Tokenizer> tok = load(kDir + "/" + style + "/tokenizer.json");
    const json& want = fixtures.at(style);
    ASSERT_EQ(want.size(), fixtures.at("texts").size());
    for (size_t i = 0; i < want.size(); ++i) {
      const std::string text = fixtures.at("texts")[i];
      const std::vector<int32_t> ids = tok->encode(text, /*allow_special=*/true);
      EXPECT_EQ(ids, want[i].at("ids").get<std::vector<int32_t>>()) << style << ": " << text;
      EXPECT_EQ(tok->decode(ids), want[i].at("decoded").get<std::string>()) << style;
    }
  }
}

TEST(HfTokenizer, IgnoreMergesTakesWholeWordsAsTokensThere) {
  const std::string path = kDir + "/llama3_style/tokenizer.json";
  const std::unique_ptr<Tokenizer> tok = load(path);
  const json vocab = read_json(path).at("model").at("vocab");
  const int32_t plugh = vocab.at("\xc4\xa0plugh").get<int32_t>();  // "Ġplugh", no merges
  EXPECT_EQ(tok->encode(" plugh"), std::vector<int32_t>{plugh});
  // Without the flag the same vocabulary merges " plugh" into smaller tokens.
  json j = hf_tokenizer_vocabulary(path);
  j["ignore_merges"] = false;
  const std::vector<int32_t> merged = tokenizer_from_vocabulary(j, "[test]")->encode(" plugh");
  EXPECT_GT(merged.size(), 1u);
}

TEST(HfTokenizer, RolesFromTheConfigOrThePostProcessor) {
  const std::string dir = kDir + "/llama3_style";
  const std::unique_ptr<Tokenizer> with =
      load(dir + "/tokenizer.json", read_json(dir + "/tokenizer_config.json"));
  EXPECT_EQ(with->bos(), 0);  // <|begin_of_text|>
  EXPECT_EQ(with->eos(), 2);  // <|eot_id|>, given as an AddedToken object
  const std::unique_ptr<Tokenizer> without = load(dir + "/tokenizer.json");
  EXPECT_EQ(without->bos(), 0);  // TemplateProcessing's first special token
  EXPECT_FALSE(without->eos().has_value());
  EXPECT_FALSE(load(kDir + "/smollm_style/tokenizer.json")->bos().has_value());
  // <tool> is an added token that is not special: matched in text, its own id.
  EXPECT_EQ(with->encode("<tool>", true), std::vector<int32_t>{702});
}

// GPT-2's encoder.json and vocab.bpe written in tokenizer.json's layout, as transformers'
// GPT2TokenizerFast saves them: its ids on Austen are the GPT-2 tokenizer's.
TEST(HfTokenizer, Gpt2FilesAsTokenizerJsonEncodeAsGpt2) {
  const std::string assets = testing::gpt2_test_asset_dir();
  const json encoder = read_json(assets + "/encoder.json");
  json merges = json::array();
  std::ifstream bpe(assets + "/vocab.bpe");
  std::string line;
  std::getline(bpe, line);  // "#version: 0.2"
  while (std::getline(bpe, line))
    if (!line.empty()) merges.push_back(line);
  const json file = {
      {"version", "1.0"},
      {"added_tokens",
       {{{"id", 50256},
         {"content", "<|endoftext|>"},
         {"single_word", false},
         {"lstrip", false},
         {"rstrip", false},
         {"normalized", true},
         {"special", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "ByteLevel"},
        {"add_prefix_space", false},
        {"trim_offsets", true},
        {"use_regex", true}}},
      {"post_processor",
       {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}}},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"vocab", encoder},
        {"merges", merges}}}};
  const fs::path path =
      fs::temp_directory_path() / ("gpt2_tokenizer_" + std::to_string(getpid()) + ".json");
  std::ofstream(path) << file.dump();
  const std::unique_ptr<Tokenizer> hf = load(path.string());
  fs::remove(path);
  const BpeTokenizer gpt2 = BpeTokenizer::gpt2(assets);
  EXPECT_EQ(hf->vocab_size(), 50257);
  const std::optional<std::string> austen = testing::austen_corpus();
  ASSERT_TRUE(austen.has_value());
  const std::string text = austen->substr(0, 200000);
  EXPECT_EQ(hf->encode(text), gpt2.encode(text));
  EXPECT_EQ(hf->encode("<|endoftext|>", true), std::vector<int32_t>{50256});
}

// hf_tokenizer_json, the writer `fitgrad export` uses: what it writes reads back to the same
// vocabulary (llama3_style: Split + ByteLevel, ignore_merges, added tokens), and SmolLM2's GGUF
// vocabulary slice (tests/golden/smollm2_slice.gguf) written as a tokenizer.json encodes as the
// GGUF tokenizer does.
TEST(HfTokenizer, WrittenTokenizerJsonReadsBackTheSame) {
  const fs::path out =
      fs::temp_directory_path() / ("written_" + std::to_string(getpid()) + ".json");
  const json original = hf_tokenizer_vocabulary(kDir + "/llama3_style/tokenizer.json");
  std::ofstream(out) << hf_tokenizer_json(original).dump();
  // The roles travel in tokenizer_config.json, as transformers keeps them.
  const json again = hf_tokenizer_vocabulary(out.string(), hf_tokenizer_config(original));
  EXPECT_TRUE(again == original) << "the vocabulary changed on its way through tokenizer.json";
  const io::GgufFile slice =
      io::GgufFile::open(std::string(FITGRAD_GOLDEN_DIR) + "/smollm2_slice.gguf");
  const json gguf = gguf_vocabulary(slice);
  std::ofstream(out) << hf_tokenizer_json(gguf).dump();
  const std::unique_ptr<Tokenizer> from_json = load(out.string());
  const std::unique_ptr<Tokenizer> from_gguf = tokenizer_from_gguf(slice);
  for (const char* text : {"It is a truth universally acknowledged", "Tabs\tand 12345 digits",
                           "<|im_start|>user\nHi<|im_end|>"})
    EXPECT_EQ(from_json->encode(text, true), from_gguf->encode(text, true)) << text;
  const json config = hf_tokenizer_config(gguf);
  EXPECT_EQ(config.at("bos_token"), "<|im_start|>");
  EXPECT_EQ(config.at("eos_token"), "<|im_end|>");
  fs::remove(out);
}

TEST(HfTokenizer, UnsupportedComponentsAreNamed) {
  const std::string path = kDir + "/llama3_style/tokenizer.json";
  const fs::path bad =
      fs::temp_directory_path() / ("bad_tokenizer_" + std::to_string(getpid()) + ".json");
  const auto expect_refused = [&](const std::function<void(json&)>& change,
                                  const std::string& part) {
    json j = read_json(path);
    change(j);
    std::ofstream(bad) << j.dump();
    fitgrad::testing::expect_error([&] { hf_tokenizer_vocabulary(bad.string()); },
                                   "[tokenizer " + bad.string() + "]", part);
  };
  expect_refused([](json& j) { j["model"]["type"] = "Unigram"; }, "model type 'Unigram'");
  expect_refused([](json& j) { j["model"]["type"] = "WordPiece"; }, "model type 'WordPiece'");
  expect_refused([](json& j) { j["model"]["byte_fallback"] = true; }, "byte_fallback");
  expect_refused([](json& j) { j["normalizer"] = {{"type", "NFKC"}}; }, "normalizer NFKC");
  // A SentencePiece decoder makes it SentencePiece-style, where Llama 3's Split is refused.
  expect_refused(
      [](json& j) {
        j["decoder"] = {{"type", "Metaspace"}};
      },
      "pre_tokenizer {\"pretokenizers\"");
  expect_refused(
      [](json& j) {
        j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xe2\x96\x81"}};
      },
      "pre_tokenizer {\"replacement\"");
  expect_refused(
      [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\s+"; },
      "pre_tokenizer Split pattern {\"Regex\":\"\\\\s+\"}");
  expect_refused([](json& j) { j["added_tokens"][3]["id"] = 710; },
                 "added token '<tool>' has id 710; the next free id is 702");
  expect_refused([](json& j) { j["added_tokens"][0]["content"] = "<s>"; },
                 "added token '<s>' has id 0, which the vocab gives to '<|begin_of_text|>'");
  expect_refused([](json& j) { j["model"]["vocab"]["extra"] = 5000; }, "vocab['extra'] = 5000");
  // A decoder of neither kind is named as the decoder, not blamed on another component.
  expect_refused(
      [](json& j) {
        j["decoder"] = {{"type", "WordPiece"}, {"prefix", "##"}};
      },
      "decoder WordPiece is not supported");
  expect_refused([](json& j) { j.erase("decoder"); }, "decoder none is not supported");
  expect_refused(
      [](json& j) {
        j["model"].erase("type");
        j["model"].erase("merges");
      },
      "model type '(none given, and no merges)'");
  // A merge of tokens the vocab lacks: named with the file (tokenizers: "Token `zzzq` out of
  // vocabulary").
  {
    json j = read_json(path);
    j["model"]["merges"].push_back({"zzzq", "qqqz"});
    std::ofstream(bad) << j.dump();
    fitgrad::testing::expect_error(
        [&] { tokenizer_from_vocabulary(hf_tokenizer_vocabulary(bad.string()), "[tokenizer x]"); },
        "[tokenizer x]", "'zzzq' is not a token");
  }
  // Without "type" a model with merges is BPE, as tokenizers reads it.
  {
    json j = read_json(path);
    j["model"].erase("type");
    std::ofstream(bad) << j.dump();
    EXPECT_TRUE(hf_tokenizer_vocabulary(bad.string()) == hf_tokenizer_vocabulary(path));
  }
  fitgrad::testing::expect_error(
      [&] {
        hf_tokenizer_vocabulary(path, json{{"eos_token", "</s>"}});
      },
      "[tokenizer " + path + "]", "the eos_token '</s>' is not an added token");
  fs::remove(bad);
}

}  // namespace
}  // namespace fitgrad::data
