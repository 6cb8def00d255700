// The tokenizer embedded in SmolLM2's GGUF file, loaded through tokenizer_from_gguf. Runs
// when the file is present (tools/fetch-smollm2.sh), else skips saying how to get it;
// tests/golden/smollm2_slice_tokenizer_test.cpp checks a committed slice of it always.
#include "data/gguf_tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "tests/io/smollm2_file.h"

namespace fitgrad::data {
namespace {

TEST(TokenizerGguf, SmolLM2VocabSpecialsAndRoundTrips) {
  if (!std::filesystem::is_regular_file(test::smollm2_path()))
    GTEST_SKIP() << test::smollm2_skip_message();
  const io::GgufFile file = io::GgufFile::open(test::smollm2_path());
  const std::unique_ptr<Tokenizer> tok_ptr = tokenizer_from_gguf(file);
  const Tokenizer& tok = *tok_ptr;
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
  // The file's chat template travels in its vocabulary (Note [Self-contained GGUF
  // vocabularies]): SmolLM2's, byte for byte the golden copy jinja2 rendered.
  std::ifstream golden(std::string(FITGRAD_GOLDEN_DIR) + "/chat_templates/smollm2.jinja");
  EXPECT_EQ(gguf_vocabulary(file).value("chat_template", std::string()),
            std::string(std::istreambuf_iterator<char>(golden), {}));
  const std::vector<int32_t> chat = tok.encode("<|im_start|>user\nHi<|im_end|>", true);
  ASSERT_FALSE(chat.empty());
  EXPECT_EQ(chat.front(), 1);
  EXPECT_EQ(chat.back(), 2);
  for (int32_t id : tok.encode("<|im_start|>user", false)) EXPECT_NE(id, 1);
}

}  // namespace
}  // namespace fitgrad::data
