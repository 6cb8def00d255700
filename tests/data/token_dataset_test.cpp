// TokenDataset: the cache is built once and reused; a changed source (content of the same
// size, the file list) or tokenizer id rebuilds it, as does a damaged cache file; folders
// join their .txt files in path order with eos between; the validation split is the
// tail; and missing, empty and non-UTF-8 sources are errors that name the file.
#include "data/token_dataset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <random>

#include "data/bpe_tokenizer.h"
#include "data/byte_tokenizer.h"
#include "tensor/error.h"
#include "tests/data/scratch_folder.h"
#include "tests/data/tokenizer_assets.h"

namespace fitgrad::data {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

using TokenDatasetTest = fitgrad::testing::ScratchFolder;

// The ids a ByteTokenizer gives: the bytes themselves (an independent reference).
std::vector<int32_t> bytes_of(const std::string& text) {
  std::vector<int32_t> ids;
  for (char c : text) ids.push_back(uint8_t(c));
  return ids;
}

std::vector<int32_t> to_vector(std::span<const int32_t> s) { return {s.begin(), s.end()}; }

std::string random_text(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string text(n, ' ');
  for (char& c : text) c = char('a' + rng() % 26);
  return text;
}

TEST_F(TokenDatasetTest, CacheIsBuiltOnceThenReused) {
  const ByteTokenizer tok;
  const std::string text = "It is a truth universally acknowledged.\n";
  const std::string src = write("book.txt", text);
  const TokenDataset first = TokenDataset::open(src, tok, "byte");
  EXPECT_TRUE(first.built());
  EXPECT_EQ(to_vector(first.tokens()), bytes_of(text));
  EXPECT_EQ(fs::path(first.cache_path()).parent_path(), fs::path(src + ".fitgrad-cache"));
  EXPECT_TRUE(fs::is_regular_file(first.cache_path()));

  const TokenDataset second = TokenDataset::open(src, tok, "byte");
  EXPECT_FALSE(second.built());
  EXPECT_EQ(second.cache_path(), first.cache_path());
  EXPECT_EQ(to_vector(second.tokens()), bytes_of(text));
  EXPECT_EQ(second.num_documents(), 1);
  // No temporary file is left beside the cache.
  EXPECT_EQ(std::distance(fs::directory_iterator(fs::path(first.cache_path()).parent_path()),
                          fs::directory_iterator()),
            1);
}

TEST_F(TokenDatasetTest, ExplicitCacheDirHoldsTheCache) {
  const ByteTokenizer tok;
  const std::string src = write("book.txt", "abc");
  TokenDatasetOptions options;
  options.cache_dir = path("caches/nested");
  const TokenDataset ds = TokenDataset::open(src, tok, "byte", options);
  EXPECT_EQ(fs::path(ds.cache_path()).parent_path(), fs::path(options.cache_dir));
  EXPECT_FALSE(fs::exists(src + ".fitgrad-cache"));
  EXPECT_FALSE(TokenDataset::open(src, tok, "byte", options).built());
}

TEST_F(TokenDatasetTest, ChangedContentOfTheSameSizeRebuilds) {
  const ByteTokenizer tok;
  const std::string src = write("book.txt", "aaaa bbbb");
  EXPECT_TRUE(TokenDataset::open(src, tok, "byte").built());
  write("book.txt", "aaaa bbbc");  // same size, one byte changed
  const TokenDataset ds = TokenDataset::open(src, tok, "byte");
  EXPECT_TRUE(ds.built());
  EXPECT_EQ(to_vector(ds.tokens()), bytes_of("aaaa bbbc"));
  write("book.txt", "aaaa bbbc!");  // another size
  EXPECT_TRUE(TokenDataset::open(src, tok, "byte").built());
  EXPECT_FALSE(TokenDataset::open(src, tok, "byte").built());
}

TEST_F(TokenDatasetTest, ChangedTokenizerIdRebuilds) {
  const ByteTokenizer tok;
  const std::string src = write("book.txt", "some text");
  const TokenDataset a = TokenDataset::open(src, tok, "byte");
  const TokenDataset b = TokenDataset::open(src, tok, "byte/v2");
  EXPECT_TRUE(b.built());
  EXPECT_NE(b.cache_path(), a.cache_path());
  // Each id keeps its own cache file.
  EXPECT_FALSE(TokenDataset::open(src, tok, "byte").built());
  EXPECT_FALSE(TokenDataset::open(src, tok, "byte/v2").built());
}

TEST_F(TokenDatasetTest, DamagedCacheIsRebuilt) {
  const ByteTokenizer tok;
  const std::string text = random_text(1000, 1);
  const std::string src = write("book.txt", text);
  const std::string cache = TokenDataset::open(src, tok, "byte").cache_path();
  const auto size = fs::file_size(cache);
  struct Damage {
    const char* name;
    std::function<void(std::fstream&)> apply;
    std::optional<uintmax_t> truncate_to;
  };
  const auto poke = [](std::streamoff at, char c) {
    return [at, c](std::fstream& f) {
      f.seekp(at);
      f.put(c);
    };
  };
  const Damage damages[] = {
      {"truncated tail", nullptr, size - 3},
      {"truncated header", nullptr, 10},
      {"empty file", nullptr, 0},
      {"bad magic", poke(0, 'X'), {}},
      {"bad version", poke(8, 9), {}},
      {"token flipped", poke(std::streamoff(size - 5), 'Q'), {}},
      {"fingerprint edited", poke(70, '#'), {}},
  };
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.name);
    if (d.truncate_to) fs::resize_file(cache, *d.truncate_to);
    if (d.apply) {
      std::fstream f(cache, std::ios::in | std::ios::out | std::ios::binary);
      d.apply(f);
    }
    const TokenDataset ds = TokenDataset::open(src, tok, "byte");
    EXPECT_TRUE(ds.built());
    EXPECT_EQ(to_vector(ds.tokens()), bytes_of(text));
    EXPECT_EQ(fs::file_size(cache), size);
    EXPECT_FALSE(TokenDataset::open(src, tok, "byte").built());
  }
}

TEST_F(TokenDatasetTest, ValidationSplitIsTheTail) {
  const ByteTokenizer tok;
  struct Row {
    size_t n;
    double val_fraction;
    size_t val;  // llround(n * val_fraction), worked out by hand
  };
  const Row rows[] = {{1000, 0.05, 50}, {1000, 0.0, 0},  {999, 0.1, 100},
                      {10, 0.25, 3},    {10, 0.999, 10}, {7, 0.5, 4}};
  for (const Row& r : rows) {
    SCOPED_TRACE(::testing::Message() << r.n << " tokens, val_fraction " << r.val_fraction);
    const std::string text = random_text(r.n, uint32_t(r.n));
    const std::string src = write("split.txt", text);
    TokenDatasetOptions options;
    options.val_fraction = r.val_fraction;
    const TokenDataset ds = TokenDataset::open(src, tok, "byte", options);
    ASSERT_EQ(ds.num_tokens(), int64_t(r.n));
    EXPECT_EQ(ds.val().size(), r.val);
    EXPECT_EQ(ds.train().size(), r.n - r.val);
    EXPECT_EQ(to_vector(ds.train()), bytes_of(text.substr(0, r.n - r.val)));
    EXPECT_EQ(to_vector(ds.val()), bytes_of(text.substr(r.n - r.val)));
  }
  // The split is not part of the cache: another val_fraction reuses it.
  const std::string src = write("other.txt", random_text(100, 5));
  EXPECT_TRUE(TokenDataset::open(src, tok, "byte").built());
  TokenDatasetOptions options;
  options.val_fraction = 0.5;
  const TokenDataset ds = TokenDataset::open(src, tok, "byte", options);
  EXPECT_FALSE(ds.built());
  EXPECT_EQ(ds.val().size(), 50u);
  for (double bad : {-0.1, 1.0, std::nan("")}) {
    options.val_fraction = bad;
    EXPECT_THROW(TokenDataset::open(src, tok, "byte", options), Error);
  }
}

TEST_F(TokenDatasetTest, FolderJoinsTextFilesInPathOrderWithEos) {
  const ByteTokenizer tok({"<|endoftext|>"});
  ASSERT_EQ(tok.eos(), 256);
  write("corpus/b.txt", "bee");
  write("corpus/a.txt", "ay");
  write("corpus/sub/c.txt", "sea");
  write("corpus/empty.txt", "");
  write("corpus/.hidden.txt", "hidden");
  write("corpus/.git/x.txt", "hidden folder");
  write("corpus/notes.md", "not text");
  const std::string src = path("corpus");
  const TokenDataset ds = TokenDataset::open(src, tok, "byte+eot");
  std::vector<int32_t> expected = bytes_of("ay");
  expected.push_back(256);
  for (int32_t id : bytes_of("bee")) expected.push_back(id);
  expected.push_back(256);  // "empty.txt" sorts before "sub/c.txt" and adds nothing
  for (int32_t id : bytes_of("sea")) expected.push_back(id);
  EXPECT_EQ(to_vector(ds.tokens()), expected);
  EXPECT_EQ(ds.num_documents(), 3);
  EXPECT_EQ(fs::path(ds.cache_path()).parent_path(), fs::path(src + ".fitgrad-cache"));
  // A trailing slash names the same folder and the same cache.
  EXPECT_FALSE(TokenDataset::open(src + "/", tok, "byte+eot").built());

  // Without an eos the documents are concatenated.
  const ByteTokenizer plain;
  EXPECT_EQ(to_vector(TokenDataset::open(src, plain, "byte").tokens()), bytes_of("aybeesea"));

  // Hidden and non-.txt files are not part of the fingerprint; a new .txt file is.
  write("corpus/.hidden2.txt", "x");
  write("corpus/more.md", "x");
  EXPECT_FALSE(TokenDataset::open(src, tok, "byte+eot").built());
  write("corpus/d.txt", "dee");
  EXPECT_TRUE(TokenDataset::open(src, tok, "byte+eot").built());
  fs::rename(path("corpus/d.txt"), path("corpus/e.txt"));  // same bytes, another name
  EXPECT_TRUE(TokenDataset::open(src, tok, "byte+eot").built());
  fs::remove(path("corpus/e.txt"));
  EXPECT_TRUE(TokenDataset::open(src, tok, "byte+eot").built());
}

TEST_F(TokenDatasetTest, ErrorsNameTheFile) {
  const ByteTokenizer tok;
  struct Row {
    const char* name;
    std::function<std::string()> make;  // returns the source to open
    std::vector<std::string> expected;  // substrings of the message
  };
  const Row rows[] = {
      {"missing file",
       [&] { return path("nope.txt"); },
       {"[data " + path("nope.txt") + "] no such file or folder"}},
      {"empty file",
       [&] { return write("empty.txt", ""); },
       {"[data " + path("empty.txt") + "] is empty"}},
      {"folder of empty files",
       [&] {
         write("empties/a.txt", "");
         return path("empties");
       },
       {"[data " + path("empties") + "] is empty"}},
      {"folder without text files",
       [&] {
         write("notext/a.md", "x");
         write("notext/.b.txt", "x");
         return path("notext");
       },
       {"[data " + path("notext") + "] holds no .txt files"}},
      {"stray continuation byte",
       [&] { return write("bad.txt", "line one\nab\x80z"); },
       {"[data " + path("bad.txt") + "] is not valid UTF-8", "byte offset 11 (line 2)", "0x80"}},
      {"truncated sequence at the end",
       [&] { return write("cut.txt", "caf\xc3"); },
       {"[data " + path("cut.txt") + "] is not valid UTF-8", "byte offset 3 (line 1)"}},
      {"bad file inside a folder",
       [&] {
         write("mixed/a.txt", "fine \xc3\xa9");
         write("mixed/b.txt", "\n\n\xed\xa0\x80");  // a UTF-16 surrogate
         return path("mixed");
       },
       {"[data " + path("mixed/b.txt") + "] is not valid UTF-8", "byte offset 2 (line 3)"}},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    try {
      TokenDataset::open(r.make(), tok, "byte");
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      for (const std::string& s : r.expected) EXPECT_THAT(e.what(), HasSubstr(s));
    }
  }
}

TEST_F(TokenDatasetTest, Gpt2BpeOnAusten) {
  // The whole corpus: about 4 MB and 1M tokens, tokenized in about 0.5 s (Release).
  const BpeTokenizer tok = BpeTokenizer::gpt2(testing::gpt2_test_asset_dir());
  const std::string src = testing::gpt2_test_asset_dir() + "/../austen.txt";
  const std::optional<std::string> text = testing::read_if_exists(src);
  ASSERT_TRUE(text.has_value());
  TokenDatasetOptions options;
  options.cache_dir = path("cache");  // not beside the committed corpus
  const TokenDataset ds = TokenDataset::open(src, tok, "gpt2", options);
  EXPECT_TRUE(ds.built());
  // The cache holds BPE ids: they decode back to the text, in fewer tokens than bytes.
  const std::vector<int32_t> ids = to_vector(ds.tokens());
  EXPECT_EQ(tok.decode(ids), *text);
  EXPECT_LT(ids.size(), text->size() / 3);
  for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.vocab_size());
  EXPECT_EQ(ds.val().size(), size_t(std::llround(0.05 * double(ids.size()))));
  const TokenDataset again = TokenDataset::open(src, tok, "gpt2", options);
  EXPECT_FALSE(again.built());
  EXPECT_EQ(to_vector(again.tokens()), ids);
}

}  // namespace
}  // namespace fitgrad::data
