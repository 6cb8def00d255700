// ByteTokenizer: a byte is its id; special tokens follow from 256.
#include "data/byte_tokenizer.h"

#include "tensor/error.h"

namespace fitgrad::data {

ByteTokenizer::ByteTokenizer(std::vector<std::string> specials)
    : special_texts_(std::move(specials)) {
  for (size_t i = 0; i < special_texts_.size(); ++i)
    add_special(special_texts_[i], 256 + int32_t(i));
  if (const auto eot = find_special("<|endoftext|>")) {
    set_bos(eot);
    set_eos(eot);
  }
}

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  out.reserve(ids.size());
  for (const int32_t id : ids) {
    if (id >= 0 && id < 256) {
      out += static_cast<char>(id);
    } else {
      FG_CHECK(id >= 256 && id < vocab_size(),
               "[tokenizer byte] decode: unknown token id {} (vocab size {})", id, vocab_size());
      out += special_texts_[size_t(id - 256)];
    }
  }
  return out;
}

}  // namespace fitgrad::data
