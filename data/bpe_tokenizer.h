// Byte-level BPE, GPT-2 style: the text is split into pieces by a pre-tokenizer
// (data/pretokenizer.h), each piece starts as its bytes, and ranked merges join adjacent
// tokens, lowest rank first, until no pair has a merge (Note [BPE merge loop] in
// data/bpe_tokenizer.cpp). Vocabularies come from GPT-2's encoder.json + vocab.bpe or, for
// GGUF files (tokenizer.ggml.model "gpt2"), from their token and merge lists.
//
// Token strings in both sources are written in GPT-2's byte-to-unicode alphabet: each byte
// is one printable character (the space 0x20 is "Ġ", U+0120). gpt2_bytes_to_unicode and
// gpt2_unicode_to_bytes convert.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/bpe_merges.h"
#include "data/pretokenizer.h"
#include "data/tokenizer.h"

namespace fitgrad::data {

// What from_vocab needs besides tokens and merges; GGUF's keys in brackets.
struct BpeVocabOptions {
  std::string name = "bpe";
  // [tokenizer.ggml.token_type] per token: 1 normal, 2 unknown, 3 control,
  // 4 user-defined, 5 unused, 6 byte. Control and user-defined tokens are special: their
  // text is taken as is, not through the byte alphabet. Empty: all normal.
  std::vector<int32_t> token_types;
  // [tokenizer.ggml.bos_token_id / eos_token_id / padding_token_id]. These tokens
  // become special tokens too.
  std::optional<int32_t> bos, eos, pad;
  // Texts of further tokens to treat as special (each must be in the vocabulary).
  std::vector<std::string> specials;
  // Matching flags of special tokens, by id (Note [Added-token matching] in tokenizer.cpp).
  std::map<int32_t, AddedTokenRule> rules;
  // Hugging Face tokenizers' BPE `ignore_merges` (Llama 3): a piece that is a token as a
  // whole is that token, whatever the merges would make of it.
  bool ignore_merges = false;
  // A tokenizer.json normalizer NFC (Qwen2): text is put in Unicode Normalization Form C
  // (data/nfc.h) before it is split.
  bool nfc = false;
};

class BpeTokenizer : public Tokenizer {
 public:
  // GPT-2's files. "<|endoftext|>" (50256) is special and is bos and eos.
  // Throws fitgrad::Error naming the file (and line) when one is missing or malformed.
  static BpeTokenizer from_gpt2_files(const std::string& encoder_json_path,
                                      const std::string& vocab_bpe_path);
  // from_gpt2_files on dir/encoder.json and dir/vocab.bpe; see gpt2_asset_dir().
  static BpeTokenizer gpt2(const std::string& dir);

  // tokens[i] is token i in the byte alphabet; merges are "left right" strings in rank
  // order, each naming two tokens whose concatenation is a token.
  static BpeTokenizer from_vocab(std::vector<std::string> tokens,
                                 const std::vector<std::string>& merges, PreTokenizer pre,
                                 BpeVocabOptions options = {});

  using Tokenizer::encode;
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int32_t vocab_size() const override { return int32_t(offsets_.size()) - 1; }
  std::string name() const override { return name_; }

  PreTokenizer pre_tokenizer() const { return pre_; }
  int32_t merge_count() const { return merge_count_; }
  // The bytes a token decodes to.
  std::string_view token_bytes(int32_t id) const;
  // Appends the BPE ids of one pre-tokenized piece to out.
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

  // Pieces of at most this many bytes are merged by a linear scan, longer ones through a
  // heap (the same result; the scan is faster on short words). For tests and benchmarks.
  void set_linear_merge_limit(size_t bytes) { merges_.set_linear_limit(bytes); }

 private:
  // Where a token or merge comes from, for errors: "[vocab.bpe:17]", "[tokenizer bpe] merge 16".
  using Where = std::function<std::string(size_t index)>;

  BpeTokenizer() = default;
  static BpeTokenizer build(std::vector<std::string> tokens, const std::vector<std::string>& merges,
                            PreTokenizer pre, BpeVocabOptions options, const Where& token_where,
                            const Where& merge_where);
  // encode() of text already normalized.
  std::vector<int32_t> encode_normalized(std::string_view text) const;

  std::string name_;
  PreTokenizer pre_ = PreTokenizer::gpt2;
  std::string bytes_;                      // all tokens' bytes, back to back
  std::vector<uint32_t> offsets_;          // token i is bytes_[offsets_[i], offsets_[i + 1])
  std::array<int32_t, 256> byte_token_{};  // the token of each single byte; -1 if none
  BpeMerges merges_;
  int32_t merge_count_ = 0;
  // With ignore_merges: every non-special token's bytes -> its id (the first of a text).
  std::unordered_map<std::string, int32_t> whole_token_;
  bool nfc_ = false;
};

// GPT-2's byte alphabet: the printable character that stands for each byte.
char32_t gpt2_byte_to_unicode(uint8_t byte);
// Bytes to their alphabet string (UTF-8), and back; nullopt when a character is not in
// the alphabet.
std::string gpt2_bytes_to_unicode(std::string_view bytes);
std::optional<std::string> gpt2_unicode_to_bytes(std::string_view text);

// The folder with GPT-2's encoder.json and vocab.bpe: $FITGRAD_ASSETS/gpt2 when that
// variable is set, else FITGRAD_ASSET_DIR/gpt2 when the build defines FITGRAD_ASSET_DIR
// (the source tree's data/assets); throws fitgrad::Error when neither exists.
std::string gpt2_asset_dir();

}  // namespace fitgrad::data
