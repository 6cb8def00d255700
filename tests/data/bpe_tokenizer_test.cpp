// BpeTokenizer on GPT-2's committed files: every r50k_base case of encode_cases.txt,
// round trips (Austen, random bytes), the ids of the whole Austen corpus against tiktoken's
// and Hugging Face tokenizers' GPT-2 BPE (count and hash below, computed by
// tests/golden/gen_tokenizer_golden.py --austen), special tokens, the heap and linear merge
// loops agreeing, from_vocab matching from_gpt2_files, GGUF-style vocabularies, file errors,
// and concurrent encodes (throughput is bench/tokenizer_bench).
#include "data/bpe_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "tensor/error.h"
#include "tests/data/tokenizer_assets.h"

namespace fitgrad::data {
namespace {

using testing::austen_corpus;
using testing::gpt2_test_asset_dir;
using ::testing::HasSubstr;
using testing::read_if_exists;

const BpeTokenizer& gpt2() {
  static const BpeTokenizer tok = BpeTokenizer::gpt2(gpt2_test_asset_dir());
  return tok;
}

struct EncodeCase {
  std::string encoding;
  std::string sample;
  std::vector<int32_t> ids;
};

// encode_cases.txt: blocks of "EncodingName: ...", "Sample: ...", "Encoded: [...]".
std::vector<EncodeCase> read_encode_cases(size_t* blocks) {
  const auto text = read_if_exists(gpt2_test_asset_dir() + "/encode_cases.txt");
  EXPECT_TRUE(text.has_value());
  std::vector<EncodeCase> cases;
  *blocks = 0;
  std::istringstream in(text.value_or(""));
  std::string line;
  EncodeCase current;
  while (std::getline(in, line)) {
    if (line.starts_with("EncodingName: ")) {
      current = EncodeCase{line.substr(14), "", {}};
      ++*blocks;
    } else if (line.starts_with("Sample: ")) {
      current.sample = line.substr(8);
    } else if (line.starts_with("Encoded: ")) {
      for (const auto& id : nlohmann::json::parse(line.substr(9)))
        current.ids.push_back(id.get<int32_t>());
      cases.push_back(current);
    }
  }
  return cases;
}

TEST(TokenizerGpt2, LoadsTheVocabulary) {
  const BpeTokenizer& tok = gpt2();
  EXPECT_EQ(tok.name(), "gpt2");
  EXPECT_EQ(tok.vocab_size(), 50257);
  EXPECT_EQ(tok.merge_count(), 50000);
  EXPECT_EQ(tok.pre_tokenizer(), PreTokenizer::gpt2);
  EXPECT_EQ(tok.eos(), 50256);
  EXPECT_EQ(tok.bos(), 50256);
  EXPECT_EQ(tok.pad(), std::nullopt);
  EXPECT_EQ(tok.token_id("<|endoftext|>"), 50256);
  EXPECT_EQ(tok.token_bytes(50256), "<|endoftext|>");
  EXPECT_EQ(tok.token_bytes(220), " ");   // "Ġ"
  EXPECT_EQ(tok.token_bytes(198), "\n");  // "Ċ"
  EXPECT_EQ(tok.token_bytes(262), " the");
}

TEST(TokenizerGpt2, EveryEncodeCase) {
  size_t blocks = 0;
  const std::vector<EncodeCase> cases = read_encode_cases(&blocks);
  EXPECT_EQ(cases.size(), blocks);
  size_t checked = 0;
  for (const EncodeCase& c : cases) {
    if (c.encoding != "r50k_base" && c.encoding != "gpt2") continue;
    SCOPED_TRACE(c.sample);
    EXPECT_EQ(gpt2().encode(c.sample), c.ids);
    EXPECT_EQ(gpt2().decode(c.ids), c.sample);
    ++checked;
  }
  EXPECT_EQ(checked, 32u);
  RecordProperty("encode_cases", int(checked));
}

TEST(TokenizerGpt2, KnownIds) {
  EXPECT_EQ(gpt2().encode("It is a truth universally acknowledged"),
            (std::vector<int32_t>{1026, 318, 257, 3872, 26208, 10810}));
  EXPECT_EQ(gpt2().encode(" hello world\n\n"), (std::vector<int32_t>{23748, 995, 628}));
  EXPECT_TRUE(gpt2().encode("").empty());
}

TEST(TokenizerGpt2, SpecialTokens) {
  const BpeTokenizer& tok = gpt2();
  // Ordinary text by default, as tiktoken's encode_ordinary.
  EXPECT_EQ(tok.encode("a<|endoftext|>b"),
            (std::vector<int32_t>{64, 27, 91, 437, 1659, 5239, 91, 29, 65}));
  EXPECT_EQ(tok.encode("a<|endoftext|>b", true), (std::vector<int32_t>{64, 50256, 65}));
  EXPECT_EQ(tok.encode("<|endoftext|><|endoftext|>", true), (std::vector<int32_t>{50256, 50256}));
  EXPECT_EQ(tok.decode({64, 50256, 65}), "a<|endoftext|>b");
}

TEST(TokenizerGpt2, AustenIdsMatchTheReference) {
  const auto austen = austen_corpus();
  ASSERT_TRUE(austen) << "data/assets/austen.txt is missing from the checkout";
  const std::vector<int32_t> ids = gpt2().encode(*austen);
  EXPECT_EQ(
      std::vector<int32_t>(ids.begin(), ids.begin() + 12),
      (std::vector<int32_t>{3620, 5673, 198, 198, 3886, 12091, 2517, 268, 628, 628, 198, 44558}));
  // FNV-1a (64-bit offset basis and prime) with one round per whole id, as
  // tests/golden/gen_tokenizer_golden.py --austen computes it.
  uint64_t hash = 14695981039346656037ull;
  for (const int32_t id : ids) hash = (hash ^ uint64_t(id)) * 1099511628211ull;
  EXPECT_EQ(ids.size(), 993327u);
  EXPECT_EQ(hash, 0xf049074c682d5955ull);
  EXPECT_EQ(gpt2().decode(ids), *austen);
}

TEST(TokenizerGpt2, AustenSampleRoundTrips) {
  const auto austen = austen_corpus();
  ASSERT_TRUE(austen) << "data/assets/austen.txt is missing from the checkout";
  // Slices that start and end anywhere, also inside a word or line.
  std::mt19937 rng(11);
  for (int i = 0; i < 50; ++i) {
    const size_t begin = rng() % austen->size();
    const std::string slice = austen->substr(begin, 1 + rng() % 4000);
    EXPECT_EQ(gpt2().decode(gpt2().encode(slice)), slice);
  }
}

TEST(TokenizerGpt2, ArbitraryBytesRoundTrip) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    std::string text(rng() % 200, '\0');
    for (char& c : text) c = char(trial % 2 ? rng() % 256 : 0x20 + rng() % 0x60);
    EXPECT_EQ(gpt2().decode(gpt2().encode(text)), text);
  }
  // A cut through a multi-byte character decodes to the bytes it holds (invalid UTF-8).
  const std::vector<int32_t> ids = gpt2().encode("\xf0\x9f\x98\x80");  // 😀
  ASSERT_GT(ids.size(), 1u);
  EXPECT_EQ(gpt2().decode({ids[0]}),
            std::string("\xf0\x9f\x98\x80").substr(0, gpt2().token_bytes(ids[0]).size()));
}

// Note [BPE merge loop]: the heap and the linear scan give the same ids.
TEST(TokenizerGpt2, HeapAndLinearMergesAgree) {
  BpeTokenizer linear = gpt2();
  BpeTokenizer heap = gpt2();
  linear.set_linear_merge_limit(size_t(-1));
  heap.set_linear_merge_limit(0);
  std::string text = "Long runs: 12345678901234567890 ----------======== !!!???          x";
  if (const auto austen = austen_corpus()) text += austen->substr(200000, 100000);
  EXPECT_EQ(heap.encode(text), gpt2().encode(text));
  EXPECT_EQ(linear.encode(text), gpt2().encode(text));
  // Whole paragraphs as single pieces: long merges, many equal-rank pairs.
  std::vector<std::string> tokens;
  for (int32_t id = 0; id < gpt2().vocab_size(); ++id)
    tokens.push_back(gpt2_bytes_to_unicode(gpt2().token_bytes(id)));
  const auto merges_text = read_if_exists(gpt2_test_asset_dir() + "/vocab.bpe");
  ASSERT_TRUE(merges_text.has_value());
  std::vector<std::string> merges;
  std::istringstream in(*merges_text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && !line.starts_with("#version")) merges.push_back(line);
  BpeTokenizer whole = BpeTokenizer::from_vocab(tokens, merges, PreTokenizer::none);
  BpeTokenizer whole_linear = whole;
  whole.set_linear_merge_limit(0);
  whole_linear.set_linear_merge_limit(size_t(-1));
  for (size_t begin : {0, 3000, 9000}) {
    if (begin >= text.size()) continue;
    const std::string piece = text.substr(begin, 2000);
    const std::vector<int32_t> ids = whole.encode(piece);
    EXPECT_EQ(ids, whole_linear.encode(piece));
    EXPECT_EQ(whole.decode(ids), piece);
  }
}

TEST(TokenizerGpt2, ConcurrentEncodes) {
  const std::string text = "The quick brown fox jumps over the lazy dog. 1234 ü 😀\n";
  std::string big;
  for (int i = 0; i < 200; ++i) big += text;
  const std::vector<int32_t> expected = gpt2().encode(big);
  std::vector<std::vector<int32_t>> got(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t)
    threads.emplace_back([&, t] { got[t] = gpt2().encode(big); });
  for (auto& th : threads) th.join();
  for (const auto& g : got) EXPECT_EQ(g, expected);
}

// from_vocab, fed what a GGUF file holds, builds the same tokenizer as GPT-2's files.
TEST(TokenizerBpeVocab, FromVocabEqualsGpt2Files) {
  const auto json_text = read_if_exists(gpt2_test_asset_dir() + "/encoder.json");
  const auto bpe_text = read_if_exists(gpt2_test_asset_dir() + "/vocab.bpe");
  ASSERT_TRUE(json_text && bpe_text);
  const nlohmann::json json = nlohmann::json::parse(*json_text);
  std::vector<std::string> tokens(json.size());
  for (const auto& [text, id] : json.items()) tokens[id.get<size_t>()] = text;
  std::vector<std::string> merges;
  std::istringstream in(*bpe_text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && !line.starts_with("#version")) merges.push_back(line);
  BpeVocabOptions options;
  options.name = "gguf-gpt2";
  options.token_types.assign(tokens.size(), 1);
  options.token_types[50256] = 3;  // control, as llama.cpp's converter writes it
  options.bos = 50256;
  options.eos = 50256;
  const BpeTokenizer tok = BpeTokenizer::from_vocab(tokens, merges, PreTokenizer::gpt2, options);
  const BpeTokenizer& ref = gpt2();
  EXPECT_EQ(tok.name(), "gguf-gpt2");
  ASSERT_EQ(tok.vocab_size(), ref.vocab_size());
  EXPECT_EQ(tok.merge_count(), ref.merge_count());
  for (int32_t id = 0; id < ref.vocab_size(); ++id)
    ASSERT_EQ(tok.token_bytes(id), ref.token_bytes(id)) << id;
  EXPECT_EQ(tok.specials(), ref.specials());
  EXPECT_EQ(tok.bos(), ref.bos());
  EXPECT_EQ(tok.eos(), ref.eos());
  size_t blocks = 0;
  for (const EncodeCase& c : read_encode_cases(&blocks))
    EXPECT_EQ(tok.encode(c.sample), ref.encode(c.sample));
  if (const auto austen = austen_corpus()) {
    const std::string sample = austen->substr(1000000, 200000);
    EXPECT_EQ(tok.encode(sample), ref.encode(sample));
  }
  EXPECT_EQ(tok.encode("x<|endoftext|>", true), (std::vector<int32_t>{87, 50256}));
}

// A GGUF-style vocabulary: 256 byte tokens, a few merges, control tokens whose text is
// taken verbatim, and the SmolLM pre-tokenizer that splits digits.
BpeTokenizer tiny_vocab(PreTokenizer pre) {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  tokens.push_back("<|endoftext|>"), types.push_back(3);
  tokens.push_back("<|im_start|>"), types.push_back(3);
  tokens.push_back("<｜begin▁of▁sentence｜>"), types.push_back(3);  // not in the byte alphabet
  for (int b = 0; b < 256; ++b)
    tokens.push_back(gpt2_bytes_to_unicode(std::string(1, char(b)))),
        types.push_back(b < 128 ? 1 : 6);
  for (const char* t : {"Ġt", "he", "Ġthe", "12", "Ġ1"}) tokens.push_back(t), types.push_back(1);
  BpeVocabOptions options;
  options.name = "tiny";
  options.token_types = types;
  options.bos = 1;
  options.eos = 0;
  return BpeTokenizer::from_vocab(tokens, {"Ġ t", "h e", "Ġt he", "1 2", "Ġ 1"}, pre, options);
}

TEST(TokenizerBpeVocab, GgufStyleVocabulary) {
  const BpeTokenizer tok = tiny_vocab(PreTokenizer::gpt2);
  const int32_t the = 261, one_two = 262, space_one = 263;
  EXPECT_EQ(tok.vocab_size(), 264);
  EXPECT_EQ(tok.encode(" the"), (std::vector<int32_t>{the}));
  EXPECT_EQ(tok.encode("<|im_start|> the", true), (std::vector<int32_t>{1, the}));
  EXPECT_EQ(tok.token_id("<｜begin▁of▁sentence｜>"), 2);
  EXPECT_EQ(tok.encode("<｜begin▁of▁sentence｜>", true), (std::vector<int32_t>{2}));
  EXPECT_EQ(tok.decode({2, the, 0}), "<｜begin▁of▁sentence｜> the<|endoftext|>");
  EXPECT_EQ(tok.bos(), 1);
  EXPECT_EQ(tok.eos(), 0);
  // " 12": GPT-2's pattern keeps " 12" whole, so "Ġ 1" (rank 4) is applied after "1 2" (3).
  EXPECT_EQ(tok.encode(" 12"), (std::vector<int32_t>{3 + ' ', one_two}));
  // SmolLM's splits every digit, so " ", "1", "2" are pieces of their own.
  const BpeTokenizer smol = tiny_vocab(PreTokenizer::smollm);
  EXPECT_EQ(smol.encode(" 12"), (std::vector<int32_t>{3 + ' ', 3 + '1', 3 + '2'}));
  EXPECT_EQ(tok.encode(" 1"), (std::vector<int32_t>{space_one}));
}

// ---- errors ----

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::path(::testing::TempDir()) /
           fmt::format("fitgrad_tok_{}_{}", ::getpid(), std::rand());
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string write(const std::string& name, const std::string& content) const {
    const std::string p = (path / name).string();
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }
};

std::string load_error(const std::string& json, const std::string& bpe) {
  const TempDir dir;
  try {
    BpeTokenizer::from_gpt2_files(dir.write("encoder.json", json), dir.write("vocab.bpe", bpe));
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// A valid miniature: the 256 byte tokens, "Ġt" and one merge.
std::string mini_json(const std::string& extra = "") {
  nlohmann::json j;
  for (int b = 0; b < 256; ++b) j[gpt2_bytes_to_unicode(std::string(1, char(b)))] = b;
  j["Ġt"] = 256;
  std::string s = j.dump(1);  // one entry per line
  if (!extra.empty()) s.insert(s.size() - 2, ",\n " + extra);
  return s;
}

TEST(TokenizerBpeErrors, MissingFiles) {
  const TempDir dir;
  const std::string json = dir.write("encoder.json", mini_json());
  const std::string missing = (dir.path / "nope.bpe").string();
  try {
    BpeTokenizer::from_gpt2_files(json, missing);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(missing));
    EXPECT_THAT(e.what(), HasSubstr("cannot open"));
  }
  EXPECT_THROW(BpeTokenizer::gpt2((dir.path / "nowhere").string()), Error);
}

TEST(TokenizerBpeErrors, MiniatureLoads) {
  EXPECT_EQ(load_error(mini_json(), "#version: 0.2\nĠ t\n"), "no error");
  const TempDir dir;
  const BpeTokenizer tok = BpeTokenizer::from_gpt2_files(dir.write("e.json", mini_json()),
                                                         dir.write("v.bpe", "Ġ t\r\n"));
  EXPECT_EQ(tok.encode(" t t"), (std::vector<int32_t>{256, 256}));
  EXPECT_EQ(tok.eos(), std::nullopt);  // no <|endoftext|> in this vocabulary
}

TEST(TokenizerBpeErrors, MalformedJsonNamesFileAndLine) {
  std::string bad = mini_json();
  bad.insert(bad.find("\n", bad.find("\n") + 1), " oops");  // damage line 2
  const std::string msg = load_error(bad, "Ġ t\n");
  EXPECT_THAT(msg, HasSubstr("encoder.json:2:"));
  EXPECT_THAT(msg, HasSubstr("malformed JSON"));
  EXPECT_THAT(load_error("[1, 2]", "Ġ t\n"), HasSubstr("expected a JSON object"));
  // Found by fuzz/gpt2_vocab_fuzz: a number beyond double's range is well-formed JSON that
  // nlohmann refuses with out_of_range, which must become an Error, not a terminate.
  EXPECT_THAT(load_error(mini_json("\"xy\": 64E5555"), "Ġ t\n"), HasSubstr("unreadable JSON"));
}

TEST(TokenizerBpeErrors, BadIds) {
  EXPECT_THAT(load_error(mini_json("\"x\": \"7\""), "Ġ t\n"), HasSubstr("not an integer"));
  EXPECT_THAT(load_error(mini_json("\"xy\": 999"), "Ġ t\n"), HasSubstr("has id 999"));
  EXPECT_THAT(load_error(mini_json("\"xy\": 5"), "Ġ t\n"), HasSubstr("id 5 is given to both"));
  EXPECT_THAT(load_error(mini_json("\"中\": 257"), "Ġ t\n"),
              HasSubstr("not in GPT-2's byte alphabet"));
}

TEST(TokenizerBpeErrors, BadMergesNameFileAndLine) {
  EXPECT_THAT(load_error(mini_json(), "#version: 0.2\nĠ t\na b c\n"), HasSubstr("vocab.bpe:3]"));
  EXPECT_THAT(load_error(mini_json(), "#version: 0.2\nĠ t\nabc\n"),
              HasSubstr("expected two tokens separated by one space"));
  const std::string unknown = load_error(mini_json(), "Ġ t\nzz t\n");
  EXPECT_THAT(unknown, HasSubstr("vocab.bpe:2]"));
  EXPECT_THAT(unknown, HasSubstr("'zz' is not a token"));
  EXPECT_THAT(load_error(mini_json(), "Ġ t\na b\n"),
              HasSubstr("the merged token 'ab' is not in the vocabulary"));
  EXPECT_THAT(load_error(mini_json(), "#version: 0.2\n"), HasSubstr("has no merges"));
}

TEST(TokenizerBpeErrors, DecodeUnknownId) {
  try {
    gpt2().decode({31373, 50257});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("unknown token id 50257"));
    EXPECT_THAT(e.what(), HasSubstr("gpt2"));
  }
  EXPECT_THROW(gpt2().decode({-5}), Error);
  EXPECT_THROW(gpt2().token_bytes(60000), Error);
}

TEST(TokenizerBpeErrors, FromVocabErrors) {
  const std::vector<std::string> tokens = {"a", "b", "ab"};
  EXPECT_THAT(
      [&] {
        try {
          BpeTokenizer::from_vocab({"a", "中"}, {}, PreTokenizer::gpt2);
        } catch (const Error& e) {
          return std::string(e.what());
        }
        return std::string();
      }(),
      HasSubstr("token 1 '中'"));
  BpeVocabOptions types;
  types.token_types = {1, 1};
  EXPECT_THROW(BpeTokenizer::from_vocab(tokens, {"a b"}, PreTokenizer::gpt2, types), Error);
  BpeVocabOptions eos;
  eos.eos = 3;
  EXPECT_THROW(BpeTokenizer::from_vocab(tokens, {"a b"}, PreTokenizer::gpt2, eos), Error);
  BpeVocabOptions special;
  special.specials = {"<|missing|>"};
  EXPECT_THROW(BpeTokenizer::from_vocab(tokens, {"a b"}, PreTokenizer::gpt2, special), Error);
  try {
    BpeTokenizer::from_vocab(tokens, {"a b", "b c"}, PreTokenizer::gpt2);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("merge 1"));
  }
  // A byte with no token cannot be encoded.
  const BpeTokenizer ab = BpeTokenizer::from_vocab(tokens, {"a b"}, PreTokenizer::gpt2);
  EXPECT_EQ(ab.encode("abab"), (std::vector<int32_t>{2, 2}));
  try {
    ab.encode("abc");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("byte 0x63 has no token"));
  }
}

TEST(TokenizerBpeErrors, AssetDirectory) {
  const char* old = std::getenv("FITGRAD_ASSETS");
  const std::string saved = old ? old : "";
  ::setenv("FITGRAD_ASSETS", "/some/assets", 1);
  EXPECT_EQ(gpt2_asset_dir(), "/some/assets/gpt2");
  ::unsetenv("FITGRAD_ASSETS");
  // Without the variable, the directory baked in at build time (data/assets) is used.
  const std::string dir = gpt2_asset_dir();
  EXPECT_TRUE(std::filesystem::exists(dir + "/encoder.json")) << dir;
  if (old) ::setenv("FITGRAD_ASSETS", saved.c_str(), 1);
}

}  // namespace
}  // namespace fitgrad::data
