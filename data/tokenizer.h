// The interface every tokenizer shares (byte-level, GPT-2 BPE, GGUF-embedded BPE): text
// to ids and back, the vocabulary size, and special tokens.
//
// Special tokens (e.g. "<|endoftext|>") have ids and texts. Plain encode(text) treats
// their text as ordinary text, the way a training corpus must be read; encode(text,
// true) cuts the text at every occurrence of a special token's text and emits its id.
// decode() writes a special token as its text. bos/eos/pad are roles that special
// tokens may play; any may be absent.
//
// An added token may carry Hugging Face tokenizers' matching flags (AddedTokenRule): lstrip
// and rstrip take the white space on that side into the token, single_word matches it only
// between non-word characters (Note [Added-token matching] in tokenizer.cpp).
//
// Implementations are immutable after construction, so encode/decode may run on many
// threads at once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fitgrad::data {

// tokenizers' AddedToken flags that change where a special token matches.
struct AddedTokenRule {
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

// Whether text[begin, end) has a word character (a letter, a digit or '_') just before or
// after it: where a single_word added token is no match (Note [Added-token matching]).
bool touches_word(std::string_view text, size_t begin, size_t end);

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Text to ids, every byte of text as ordinary text.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // With allow_special, the texts of special tokens become their ids (the longest wins
  // where several start at the same place); without, the same as encode(text).
  // Subclasses bring it into scope with `using Tokenizer::encode;`.
  std::vector<int32_t> encode(std::string_view text, bool allow_special) const;

  // Ids to bytes. The bytes need not be valid UTF-8: a byte-level token can be part of a
  // character, so a slice of ids may cut one. Throws fitgrad::Error naming an unknown id.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  // The bytes of ids that continue a text already decoded (streaming a generation): what
  // decode(prefix + ids) adds to decode(prefix). The same as decode except for tokenizers
  // whose decoder treats the start of a text alone (SentencePiece's leading space).
  virtual std::string decode_continuation(const std::vector<int32_t>& ids) const {
    return decode(ids);
  }

  // Ids run from 0 to vocab_size() - 1, special tokens included.
  virtual int32_t vocab_size() const = 0;
  virtual std::string name() const = 0;

  std::optional<int32_t> bos() const { return bos_; }
  std::optional<int32_t> eos() const { return eos_; }
  std::optional<int32_t> pad() const { return pad_; }
  void set_bos(std::optional<int32_t> id);
  void set_eos(std::optional<int32_t> id);
  void set_pad(std::optional<int32_t> id);

  // The id of a special token by its text; throws fitgrad::Error when there is none.
  int32_t token_id(std::string_view special) const;
  std::optional<int32_t> find_special(std::string_view special) const;
  bool is_special(int32_t id) const;
  // (text, id) of every special token, in the order they were added.
  const std::vector<std::pair<std::string, int32_t>>& specials() const { return specials_; }

 protected:
  // Registers a special token; the text must be non-empty and new, the id in range.
  void add_special(std::string text, int32_t id, AddedTokenRule rule = {});
  // The ids of a stretch of text between special tokens; `at_start` when it begins the
  // whole text (SentencePiece's prefix rules tell the two apart).
  virtual std::vector<int32_t> encode_part(std::string_view text, bool at_start) const {
    (void)at_start;
    return encode(text);
  }

 private:
  void check_role(const char* role, std::optional<int32_t> id) const;

  std::vector<std::pair<std::string, int32_t>> specials_;
  std::vector<AddedTokenRule> rules_;  // specials_[i]'s
  std::optional<int32_t> bos_, eos_, pad_;
};

}  // namespace fitgrad::data
