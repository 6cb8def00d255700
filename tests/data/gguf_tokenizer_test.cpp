// The tokenizer embedded in SmolLM2's GGUF file, loaded through tokenizer_from_gguf. Runs
// when the file is present (tools/fetch-smollm2.sh), else skips saying how to get it.
#include "data/gguf_tokenizer.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

namespace fitgrad::data {
namespace {

std::string smollm2_path() {
  if (const char* p = std::getenv("FITGRAD_SMOLLM2"); p && *p) return p;
  const char* cache = std::getenv("FITGRAD_CACHE");
  const char* home = std::getenv("HOME");
  return (cache && *cache ? std::string(cache)
                          : std::string(home ? home : "") + "/.cache/fitgrad") +
         "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

TEST(TokenizerGguf, SmolLM2VocabSpecialsAndRoundTrips) {
  if (!std::filesystem::is_regular_file(smollm2_path()))
    GTEST_SKIP() << "SmolLM2 GGUF not found at " << smollm2_path()
                 << "; run tools/fetch-smollm2.sh or set FITGRAD_SMOLLM2";
  const nn::GgufFile file = nn::GgufFile::open(smollm2_path());
  const BpeTokenizer tok = tokenizer_from_gguf(file);
  EXPECT_EQ(tok.vocab_size(), 49152);
  ASSERT_TRUE(tok.bos() && tok.eos());
  EXPECT_EQ(*tok.bos(), 1);  // <|im_start|>
  EXPECT_EQ(*tok.eos(), 2);  // <|im_end|>
  EXPECT_EQ(tok.decode({*tok.bos()}), "<|im_start|>");
  // SmolLM's pre-tokenizer splits every digit on its own.
  const std::vector<int32_t> digits = tok.encode("12345");
  ASSERT_EQ(digits.size(), 5u);
  EXPECT_EQ(tok.decode({digits[2]}), "3");
  for (const char* text :
       {"It is a truth universally acknowledged, that a single man in possession of a good "
        "fortune, must be in want of a wife.",
        "Tabs\tand\nnewlines,  double  spaces, caf\xc3\xa9, \xe2\x82\xac"
        "42 and 'quotes' it's"}) {
    EXPECT_EQ(tok.decode(tok.encode(text)), text);
  }
  const std::vector<int32_t> chat = tok.encode("<|im_start|>user\nHi<|im_end|>", true);
  ASSERT_FALSE(chat.empty());
  EXPECT_EQ(chat.front(), 1);
  EXPECT_EQ(chat.back(), 2);
  for (int32_t id : tok.encode("<|im_start|>user", false)) EXPECT_NE(id, 1);
}

}  // namespace
}  // namespace fitgrad::data
