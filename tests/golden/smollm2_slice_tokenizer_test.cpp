// fitgrad's GGUF tokenizer (data::tokenizer_from_gguf) on the vocabulary slice of
// SmolLM2-135M-Instruct committed in smollm2_slice.gguf, against Hugging Face's
// `tokenizers` (smollm2_slice.gtb, both from gen_smollm2_fixture.py). The slice holds
// every token and merge that BPE uses on the stored texts, so its ids are the full
// vocabulary's renumbered, and the generator checks that `tokenizers` gives the same
// tokens on the slice and on the full vocabulary. Needs no model download, so it always
// runs; GoldenSmolLM2.TokenizerGivesTheReferenceIds checks the full vocabulary when the
// model is present.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/bpe_tokenizer.h"
#include "data/gguf_tokenizer.h"
#include "tests/golden/golden_file.h"

namespace fitgrad::testing {
namespace {

std::vector<int32_t> ids_of(const GoldenFile& ref, const std::string& name) {
  const std::vector<int64_t> v = ref.tensor(name).to_vector<int64_t>();
  return {v.begin(), v.end()};
}

TEST(SmolLM2Slice, TokenizerGivesTheIdsOfTokenizers) {
  const io::GgufFile file = io::GgufFile::open(golden_path("smollm2_slice.gguf"));
  const GoldenFile ref(golden_path("smollm2_slice.gtb"));
  const std::unique_ptr<data::Tokenizer> tok_ptr = data::tokenizer_from_gguf(file);
  auto& tok = dynamic_cast<data::BpeTokenizer&>(*tok_ptr);
  const std::vector<int32_t> slice_to_full = ids_of(ref, "slice_to_full");
  ASSERT_EQ(tok.vocab_size(), int32_t(slice_to_full.size()));
  ASSERT_TRUE(tok.bos() && tok.eos());
  EXPECT_EQ(slice_to_full[*tok.bos()], 1);  // <|im_start|>
  EXPECT_EQ(slice_to_full[*tok.eos()], 2);  // <|im_end|>
  const auto& texts = ref.meta().at("texts");
  ASSERT_GE(texts.size(), 12u);
  // Pieces up to 32 bytes merge by a linear scan, longer ones through a heap; limit 0
  // sends every piece through the heap.
  for (size_t limit : {size_t(32), size_t(0)}) {
    tok.set_linear_merge_limit(limit);
    for (size_t k = 0; k < texts.size(); ++k) {
      const std::string text = texts[k].get<std::string>();
      SCOPED_TRACE(fmt::format("text {} (linear merge limit {}): {}", k, limit, text));
      const std::string nn = fmt::format("{:02d}", k);
      const std::vector<int32_t> got = tok.encode(text, /*allow_special=*/true);
      EXPECT_EQ(got, ids_of(ref, "text_ids." + nn));
      std::vector<int32_t> full;
      for (int32_t id : got) full.push_back(slice_to_full.at(size_t(id)));
      EXPECT_EQ(full, ids_of(ref, "full_ids." + nn));
      EXPECT_EQ(tok.decode(got), text);
    }
  }
}

}  // namespace
}  // namespace fitgrad::testing
