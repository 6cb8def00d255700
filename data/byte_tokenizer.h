// The byte-level tokenizer: ids 0..255 are the bytes themselves, and special tokens, if
// any, follow from 256 in the order given. Any byte string round-trips, valid UTF-8 or
// not. A special named "<|endoftext|>" becomes the eos (and bos) token.
#pragma once

#include "data/tokenizer.h"

namespace fitgrad::data {

class ByteTokenizer : public Tokenizer {
 public:
  explicit ByteTokenizer(std::vector<std::string> specials = {});

  using Tokenizer::encode;
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int32_t vocab_size() const override { return 256 + int32_t(special_texts_.size()); }
  std::string name() const override { return "byte"; }

 private:
  std::vector<std::string> special_texts_;  // special_texts_[i] has id 256 + i
};

}  // namespace fitgrad::data
