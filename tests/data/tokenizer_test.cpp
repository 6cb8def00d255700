// The Tokenizer interface through ByteTokenizer: byte round trips (invalid UTF-8
// included), special tokens in text with and without allow_special, bos/eos/pad roles,
// and the errors for unknown ids and special names.
#include "data/tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "data/byte_tokenizer.h"
#include "tensor/error.h"

namespace fitgrad::data {
namespace {

using ::testing::HasSubstr;

TEST(TokenizerByte, RoundTripsArbitraryBytes) {
  const ByteTokenizer tok;
  EXPECT_EQ(tok.vocab_size(), 256);
  EXPECT_EQ(tok.name(), "byte");
  std::mt19937 rng(3);
  for (int trial = 0; trial < 100; ++trial) {
    std::string text(rng() % 300, '\0');
    for (char& c : text) c = char(rng() % 256);
    const std::vector<int32_t> ids = tok.encode(text);
    ASSERT_EQ(ids.size(), text.size());
    for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(ids[i], uint8_t(text[i]));
    EXPECT_EQ(tok.decode(ids), text);
  }
  const std::string invalid = "ok \xff\xfe \xc3( \xed\xa0\x80 end";
  EXPECT_EQ(tok.decode(tok.encode(invalid)), invalid);
  EXPECT_TRUE(tok.encode("").empty());
  EXPECT_EQ(tok.decode({}), "");
}

TEST(TokenizerByte, SpecialTokensFollowTheBytes) {
  ByteTokenizer tok({"<|endoftext|>", "<|pad|>"});
  EXPECT_EQ(tok.vocab_size(), 258);
  EXPECT_EQ(tok.token_id("<|endoftext|>"), 256);
  EXPECT_EQ(tok.token_id("<|pad|>"), 257);
  EXPECT_EQ(tok.eos(), 256);
  EXPECT_EQ(tok.bos(), 256);
  EXPECT_EQ(tok.pad(), std::nullopt);
  tok.set_pad(257);
  EXPECT_EQ(tok.pad(), 257);
  EXPECT_TRUE(tok.is_special(257));
  EXPECT_FALSE(tok.is_special(65));
  EXPECT_EQ(tok.decode({104, 105, 256, 257}), "hi<|endoftext|><|pad|>");
}

TEST(TokenizerByte, AllowSpecialCutsAtSpecialTexts) {
  const ByteTokenizer tok({"<|endoftext|>", "<s>", "<s>>"});
  const std::string text = "a<|endoftext|>b<s>>c<s>";
  // Without the flag the special texts are ordinary bytes.
  EXPECT_EQ(tok.encode(text, false), tok.encode(text));
  EXPECT_EQ(tok.encode(text).size(), text.size());
  // With it they are ids; "<s>>" beats "<s>" where both start.
  EXPECT_EQ(tok.encode(text, true), (std::vector<int32_t>{'a', 256, 'b', 258, 'c', 257}));
  EXPECT_EQ(tok.decode(tok.encode(text, true)), text);
  EXPECT_EQ(tok.encode("<s><s>", true), (std::vector<int32_t>{257, 257}));
  EXPECT_EQ(tok.encode("plain", true), tok.encode("plain"));
  EXPECT_TRUE(tok.encode("", true).empty());
}

TEST(TokenizerByte, Errors) {
  ByteTokenizer tok({"<|endoftext|>"});
  try {
    tok.decode({65, 300});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("unknown token id 300"));
  }
  EXPECT_THROW(tok.decode({-1}), Error);
  try {
    tok.token_id("<|nope|>");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'<|nope|>'"));
    EXPECT_THAT(e.what(), HasSubstr("<|endoftext|>"));
  }
  EXPECT_EQ(tok.find_special("<|nope|>"), std::nullopt);
  EXPECT_THROW(tok.set_eos(257), Error);
  EXPECT_THROW(ByteTokenizer({"<a>", "<a>"}), Error);
  EXPECT_THROW(ByteTokenizer({""}), Error);
}

// The interface is usable through a base pointer, overloads included.
TEST(TokenizerByte, ThroughTheInterface) {
  const ByteTokenizer byte({"<|endoftext|>"});
  const Tokenizer& tok = byte;
  EXPECT_EQ(tok.encode("x<|endoftext|>", true), (std::vector<int32_t>{'x', 256}));
  EXPECT_EQ(tok.decode(tok.encode("xyz")), "xyz");
  EXPECT_EQ(tok.specials().size(), 1u);
}

}  // namespace
}  // namespace fitgrad::data
