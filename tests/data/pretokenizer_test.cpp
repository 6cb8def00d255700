// Pre-tokenizers and UTF-8: the splits of GPT-2's, Llama 3's, Qwen2's and SmolLM's
// patterns on tricky text (expected pieces produced by Python's `regex` module with the
// patterns of Note [Pre-tokenizer patterns]: split_cases() is the output of
// tests/golden/gen_tokenizer_golden.py --splits), tiling on arbitrary bytes, strict UTF-8
// decoding, character classes, and the GGUF pre-tokenizer names.
#include "data/pretokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "data/utf8.h"
#include "tensor/error.h"

namespace fitgrad::data {
namespace {

using ::testing::HasSubstr;

struct SplitCase {
  PreTokenizer pre;
  std::string text;
  std::vector<std::string> pieces;
};

const std::vector<SplitCase>& split_cases() {
  static const std::vector<SplitCase> cases = {
      {PreTokenizer::gpt2, "Hello world", {"Hello", " world"}},
      {PreTokenizer::gpt2,
       "I'm here, they're 'RE' you'LL",
       {"I", "'m", " here", ",", " they", "'re", " '", "RE", "'", " you", "'", "LL"}},
      {PreTokenizer::gpt2, "  two  spaces   three", {" ", " two", " ", " spaces", "  ", " three"}},
      {PreTokenizer::gpt2,
       "tab\tand\nnew\r\nline\n\n",
       {"tab", "\t", "and", "\n", "new", "\r", "\n", "line", "\n\n"}},
      {PreTokenizer::gpt2, "trailing   ", {"trailing", "   "}},
      {PreTokenizer::gpt2, "12345 678,9", {"12345", " 678", ",", "9"}},
      {PreTokenizer::gpt2, "x²+y³=½ Ⅻ", {"x", "²", "+", "y", "³", "=", "½", " Ⅻ"}},
      {PreTokenizer::gpt2, "naïve café — “quoted”", {"naïve", " café", " —", " “", "quoted", "”"}},
      {PreTokenizer::gpt2,
       "\u00a0nbsp\u3000ideo\u2028sep",
       {"\u00a0", "nbsp", "\u3000", "ideo", "\u2028", "sep"}},
      {PreTokenizer::gpt2,
       "$$$ ?!?!!! \n\n  (paren)",
       {"$$$", " ?!?!!!", " \n\n ", " (", "paren", ")"}},
      {PreTokenizer::gpt2, "日本語のテキスト123です", {"日本語のテキスト", "123", "です"}},
      {PreTokenizer::gpt2, "emoji 😀😀 🇫🇷!", {"emoji", " 😀😀", " 🇫🇷!"}},
      {PreTokenizer::gpt2, "'s's 'S 'll'", {"'s", "'s", " '", "S", " '", "ll", "'"}},
      {PreTokenizer::gpt2,
       "line1\n  line2\r\n\r\n",
       {"line", "1", "\n ", " line", "2", "\r\n\r\n"}},
      {PreTokenizer::llama3, "Hello world", {"Hello", " world"}},
      {PreTokenizer::llama3,
       "I'm here, they're 'RE' you'LL",
       {"I", "'m", " here", ",", " they", "'re", " '", "RE", "'", " you", "'LL"}},
      {PreTokenizer::llama3,
       "  two  spaces   three",
       {" ", " two", " ", " spaces", "  ", " three"}},
      {PreTokenizer::llama3,
       "tab\tand\nnew\r\nline\n\n",
       {"tab", "\tand", "\n", "new", "\r\n", "line", "\n\n"}},
      {PreTokenizer::llama3, "trailing   ", {"trailing", "   "}},
      {PreTokenizer::llama3, "12345 678,9", {"123", "45", " ", "678", ",", "9"}},
      {PreTokenizer::llama3, "x²+y³=½ Ⅻ", {"x", "²", "+y", "³", "=", "½", " ", "Ⅻ"}},
      {PreTokenizer::llama3,
       "naïve café — “quoted”",
       {"naïve", " café", " —", " “", "quoted", "”"}},
      {PreTokenizer::llama3,
       "\u00a0nbsp\u3000ideo\u2028sep",
       {"\u00a0nbsp", "\u3000ideo", "\u2028sep"}},
      {PreTokenizer::llama3,
       "$$$ ?!?!!! \n\n  (paren)",
       {"$$$", " ?!?!!!", " \n\n", " ", " (", "paren", ")"}},
      {PreTokenizer::llama3, "日本語のテキスト123です", {"日本語のテキスト", "123", "です"}},
      {PreTokenizer::llama3, "emoji 😀😀 🇫🇷!", {"emoji", " 😀😀", " 🇫🇷!"}},
      {PreTokenizer::llama3, "'s's 'S 'll'", {"'s", "'s", " '", "S", " '", "ll", "'"}},
      {PreTokenizer::llama3,
       "line1\n  line2\r\n\r\n",
       {"line", "1", "\n", " ", " line", "2", "\r\n\r\n"}},
      {PreTokenizer::qwen2, "Hello world", {"Hello", " world"}},
      {PreTokenizer::qwen2,
       "I'm here, they're 'RE' you'LL",
       {"I", "'m", " here", ",", " they", "'re", " '", "RE", "'", " you", "'LL"}},
      {PreTokenizer::qwen2, "  two  spaces   three", {" ", " two", " ", " spaces", "  ", " three"}},
      {PreTokenizer::qwen2,
       "tab\tand\nnew\r\nline\n\n",
       {"tab", "\tand", "\n", "new", "\r\n", "line", "\n\n"}},
      {PreTokenizer::qwen2, "trailing   ", {"trailing", "   "}},
      {PreTokenizer::qwen2, "12345 678,9", {"1", "2", "3", "4", "5", " ", "6", "7", "8", ",", "9"}},
      {PreTokenizer::qwen2, "x²+y³=½ Ⅻ", {"x", "²", "+y", "³", "=", "½", " ", "Ⅻ"}},
      {PreTokenizer::qwen2, "naïve café — “quoted”", {"naïve", " café", " —", " “", "quoted", "”"}},
      {PreTokenizer::qwen2,
       "\u00a0nbsp\u3000ideo\u2028sep",
       {"\u00a0nbsp", "\u3000ideo", "\u2028sep"}},
      {PreTokenizer::qwen2,
       "$$$ ?!?!!! \n\n  (paren)",
       {"$$$", " ?!?!!!", " \n\n", " ", " (", "paren", ")"}},
      {PreTokenizer::qwen2, "日本語のテキスト123です", {"日本語のテキスト", "1", "2", "3", "です"}},
      {PreTokenizer::qwen2, "emoji 😀😀 🇫🇷!", {"emoji", " 😀😀", " 🇫🇷!"}},
      {PreTokenizer::qwen2, "'s's 'S 'll'", {"'s", "'s", " '", "S", " '", "ll", "'"}},
      {PreTokenizer::qwen2,
       "line1\n  line2\r\n\r\n",
       {"line", "1", "\n", " ", " line", "2", "\r\n\r\n"}},
      {PreTokenizer::smollm, "Hello world", {"Hello", " world"}},
      {PreTokenizer::smollm,
       "I'm here, they're 'RE' you'LL",
       {"I", "'m", " here", ",", " they", "'re", " '", "RE", "'", " you", "'", "LL"}},
      {PreTokenizer::smollm,
       "  two  spaces   three",
       {" ", " two", " ", " spaces", "  ", " three"}},
      {PreTokenizer::smollm,
       "tab\tand\nnew\r\nline\n\n",
       {"tab", "\t", "and", "\n", "new", "\r", "\n", "line", "\n\n"}},
      {PreTokenizer::smollm, "trailing   ", {"trailing", "   "}},
      {PreTokenizer::smollm,
       "12345 678,9",
       {"1", "2", "3", "4", "5", " ", "6", "7", "8", ",", "9"}},
      {PreTokenizer::smollm, "x²+y³=½ Ⅻ", {"x", "²", "+", "y", "³", "=", "½", " ", "Ⅻ"}},
      {PreTokenizer::smollm,
       "naïve café — “quoted”",
       {"naïve", " café", " —", " “", "quoted", "”"}},
      {PreTokenizer::smollm,
       "\u00a0nbsp\u3000ideo\u2028sep",
       {"\u00a0", "nbsp", "\u3000", "ideo", "\u2028", "sep"}},
      {PreTokenizer::smollm,
       "$$$ ?!?!!! \n\n  (paren)",
       {"$$$", " ?!?!!!", " \n\n ", " (", "paren", ")"}},
      {PreTokenizer::smollm,
       "日本語のテキスト123です",
       {"日本語のテキスト", "1", "2", "3", "です"}},
      {PreTokenizer::smollm, "emoji 😀😀 🇫🇷!", {"emoji", " 😀😀", " 🇫🇷!"}},
      {PreTokenizer::smollm, "'s's 'S 'll'", {"'s", "'s", " '", "S", " '", "ll", "'"}},
      {PreTokenizer::smollm,
       "line1\n  line2\r\n\r\n",
       {"line", "1", "\n ", " line", "2", "\r\n\r\n"}},
  };
  return cases;
}

TEST(TokenizerPre, SplitsLikeTheRegex) {
  for (const SplitCase& c : split_cases()) {
    SCOPED_TRACE(fmt::format("{} on '{}'", pre_tokenizer_name(c.pre), c.text));
    const std::vector<std::string_view> got = pre_tokenize(c.pre, c.text);
    EXPECT_EQ(std::vector<std::string>(got.begin(), got.end()), c.pieces);
  }
}

TEST(TokenizerPre, NoneIsOnePiece) {
  EXPECT_EQ(pre_tokenize(PreTokenizer::none, "a b  c").size(), 1u);
  EXPECT_TRUE(pre_tokenize(PreTokenizer::none, "").empty());
  EXPECT_TRUE(pre_tokenize(PreTokenizer::gpt2, "").empty());
}

// Random bytes (mostly invalid UTF-8) and random mixes of classes: the pieces are
// non-empty and tile the input, for every pre-tokenizer.
TEST(TokenizerPre, PiecesTileArbitraryBytes) {
  std::mt19937 rng(7);
  const std::vector<std::string> atoms = {"a",      "Z",  "7",  " ",    "  ",   "\n",
                                          "\r\n",   "\t", "'s", "'",    "!",    "é",
                                          "\u00a0", "中", "😀",  "\xff", "\x80", "\xc3"};
  for (int trial = 0; trial < 200; ++trial) {
    std::string text;
    const int len = int(rng() % 64);
    for (int i = 0; i < len; ++i) {
      if (trial % 2 == 0)
        text += char(rng() % 256);
      else
        text += atoms[rng() % atoms.size()];
    }
    for (PreTokenizer pre : {PreTokenizer::gpt2, PreTokenizer::llama3, PreTokenizer::qwen2,
                             PreTokenizer::smollm, PreTokenizer::none}) {
      std::string joined;
      for (std::string_view piece : pre_tokenize(pre, text)) {
        EXPECT_FALSE(piece.empty());
        joined += piece;
      }
      EXPECT_EQ(joined, text) << pre_tokenizer_name(pre);
    }
  }
}

// Note [Invalid UTF-8]: a stray byte is punctuation-like and joins such runs.
TEST(TokenizerPre, InvalidBytesArePunctuation) {
  const std::vector<std::string_view> got = pre_tokenize(PreTokenizer::gpt2, "ab \xff\xfe! cd");
  EXPECT_EQ(std::vector<std::string>(got.begin(), got.end()),
            (std::vector<std::string>{"ab", " \xff\xfe!", " cd"}));
}

TEST(TokenizerPre, GgufNames) {
  EXPECT_EQ(pre_tokenizer_from_gguf("gpt2"), PreTokenizer::gpt2);
  EXPECT_EQ(pre_tokenizer_from_gguf(""), PreTokenizer::gpt2);
  EXPECT_EQ(pre_tokenizer_from_gguf("llama-bpe"), PreTokenizer::llama3);
  EXPECT_EQ(pre_tokenizer_from_gguf("qwen2"), PreTokenizer::qwen2);
  EXPECT_EQ(pre_tokenizer_from_gguf("smollm"), PreTokenizer::smollm);
  try {
    pre_tokenizer_from_gguf("no-such-pre");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'no-such-pre'"));
  }
}

TEST(TokenizerUtf8, DecodesWellFormedSequences) {
  const std::string text = "a\u00e9\u4e2d\U0001F600";
  std::vector<char32_t> cps;
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char c = decode_utf8(text, pos);
    cps.push_back(c.cp);
    pos += c.length;
  }
  EXPECT_EQ(cps, (std::vector<char32_t>{U'a', 0xE9, 0x4E2D, 0x1F600}));
  std::string back;
  for (char32_t cp : cps) append_utf8(back, cp);
  EXPECT_EQ(back, text);
  EXPECT_TRUE(is_valid_utf8(text));
}

TEST(TokenizerUtf8, RejectsMalformedSequences) {
  for (std::string bad :
       {std::string("\x80"), std::string("\xc0\xaf"), std::string("\xc3"),
        std::string("\xe0\x80\x80"), std::string("\xed\xa0\x80"), std::string("\xf4\x90\x80\x80"),
        std::string("\xff"), std::string("\xe4\xb8")}) {
    SCOPED_TRACE(bad.size());
    EXPECT_FALSE(is_valid_utf8(bad));
    const Utf8Char c = decode_utf8(bad, 0);
    EXPECT_EQ(c.cp, kInvalidCodePoint);
    EXPECT_EQ(c.length, 1u);
  }
}

TEST(TokenizerUtf8, CharacterClasses) {
  EXPECT_EQ(char_class(U'a'), CharClass::letter);
  EXPECT_EQ(char_class(0xE9), CharClass::letter);    // é
  EXPECT_EQ(char_class(0x4E2D), CharClass::letter);  // 中
  EXPECT_EQ(char_class(0x02B0), CharClass::letter);  // ʰ, Lm
  EXPECT_EQ(char_class(U'7'), CharClass::number);
  EXPECT_EQ(char_class(0x00B2), CharClass::number);  // ², No
  EXPECT_EQ(char_class(0x0663), CharClass::number);  // Arabic-Indic three, Nd
  EXPECT_EQ(char_class(0x216B), CharClass::number);  // Ⅻ, Nl
  EXPECT_EQ(char_class(U' '), CharClass::space);
  EXPECT_EQ(char_class(0x0085), CharClass::space);
  EXPECT_EQ(char_class(0x00A0), CharClass::space);
  EXPECT_EQ(char_class(0x3000), CharClass::space);
  EXPECT_EQ(char_class(0x200B), CharClass::other);   // zero-width space is not White_Space
  EXPECT_EQ(char_class(0x0301), CharClass::other);   // combining acute, Mn
  EXPECT_EQ(char_class(0x1F600), CharClass::other);  // emoji, So
  EXPECT_EQ(char_class(U'!'), CharClass::other);
  EXPECT_EQ(char_class(kInvalidCodePoint), CharClass::other);
  EXPECT_GT(std::string(unicode_table_version()).size(), 0u);
}

}  // namespace
}  // namespace fitgrad::data
