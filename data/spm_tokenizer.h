// SentencePiece-style BPE, as Llama 2, Mistral, Gemma and Phi-3 ship it (tokenizer.json with
// byte_fallback, or a GGUF file whose tokenizer.ggml.model is "llama"): spaces become "▁"
// (U+2581) with a "▁" prefixed by the family's rule, each character of a word is its token
// (or its UTF-8 bytes as <0xXX> tokens, or <unk>), and ranked merges join them (the loop of
// bpe_merges.h). Tokens are stored as their text ("▁the", "<0x0A>"); decode turns "▁" back
// into spaces and byte tokens into their bytes. See Note [SentencePiece pipelines] in
// spm_tokenizer.cpp for the rules and the Hugging Face components each stands for.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/bpe_merges.h"
#include "data/tokenizer.h"

namespace fitgrad::data {

struct SpmOptions {
  std::string name = "spm";
  // Token types as GGUF numbers them (1 normal, 2 unknown, 3 control, 4 user-defined,
  // 5 unused, 6 byte); unknown, control and user-defined tokens are special tokens, and a
  // normal token spelled <0xXX> is a byte. Empty: all normal.
  std::vector<int32_t> token_types;
  std::optional<int32_t> bos, eos, pad, unk;
  // Matching flags of added tokens, by id (Note [Added-token matching] in tokenizer.cpp).
  std::map<int32_t, AddedTokenRule> rules;
  // Non-special added tokens matched in the normalized text (tokenizers' normalized=true).
  std::vector<int32_t> normalized_added;

  // The normalizer: Prepend("▁") and Replace(" ", "▁") (Llama 2's legacy pair, or Gemma's
  // Replace alone).
  bool normalizer_prepend = false;
  bool normalizer_replace = false;
  // The Metaspace pre-tokenizer: spaces become "▁" and a "▁" is prefixed per its scheme;
  // split cuts before each "▁".
  enum class Metaspace { none, always, first, never };
  Metaspace metaspace = Metaspace::none;
  bool metaspace_split = false;

  bool byte_fallback = true;
  bool fuse_unk = true;
  bool ignore_merges = false;

  // The decoder: "▁" to space, bytes, and then strip (one leading space of the text,
  // Strip(" ", 1, 0)), metaspace (the first token's "▁" dropped), or plain (Gemma).
  enum class Decoder { plain, strip, metaspace };
  Decoder decoder = Decoder::strip;
};

// The byte a "<0xXX>" token (upper-case hex, as SentencePiece spells them) stands for, or -1.
int spm_byte_token(std::string_view text);

class SpmTokenizer : public Tokenizer {
 public:
  // tokens[i] is token i's text; merges are "left right" strings in rank order. Throws
  // fitgrad::Error naming the token or merge at fault.
  static SpmTokenizer from_vocab(std::vector<std::string> tokens,
                                 const std::vector<std::string>& merges, SpmOptions options);
  // The merges SentencePiece's scores imply (llama.cpp's rule: of the adjacent pairs whose
  // text is a token, the one whose token scores highest merges first), as "left right"
  // strings in rank order, for a vocabulary that has scores instead of merges.
  static std::vector<std::string> merges_from_scores(const std::vector<std::string>& tokens,
                                                     const std::vector<float>& scores,
                                                     const std::vector<int32_t>& token_types);

  using Tokenizer::encode;
  std::vector<int32_t> encode(std::string_view text) const override {
    return encode_part(text, true);
  }
  std::string decode(const std::vector<int32_t>& ids) const override;
  std::string decode_continuation(const std::vector<int32_t>& ids) const override;
  int32_t vocab_size() const override { return int32_t(texts_.size()); }
  std::string name() const override { return options_.name; }

  // Token id's text as the vocabulary holds it ("▁the").
  const std::string& token_text(int32_t id) const;

 protected:
  std::vector<int32_t> encode_part(std::string_view text, bool at_start) const override;

 private:
  SpmTokenizer() = default;
  // The Metaspace step and BPE of one piece of normalized text; at_text_start when it begins
  // the whole text (Metaspace's "first").
  void encode_piece(std::string_view piece, bool at_text_start, std::vector<int32_t>& out) const;
  // BPE of one word.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  std::string decode_ids(const std::vector<int32_t>& ids, bool at_start) const;

  SpmOptions options_;
  std::vector<std::string> texts_;   // token i's text
  std::vector<std::string> output_;  // what token i decodes to ("▁" as space, bytes)
  std::vector<char> is_byte_;
  std::unordered_map<std::string, int32_t> char_token_;      // single-character tokens
  std::unordered_map<std::string, int32_t> whole_token_;     // with ignore_merges
  std::array<int32_t, 256> byte_token_{};                    // <0xXX>; -1 when absent
  std::vector<std::pair<std::string, int32_t>> normalized_;  // normalized text -> added id
  BpeMerges merges_;
  // Whether words may be cut before each "▁" that follows another character: no token
  // has such a "▁" inside, so no merge can cross the cut (Note [SentencePiece pipelines]).
  bool cut_words_ = false;
};

}  // namespace fitgrad::data
