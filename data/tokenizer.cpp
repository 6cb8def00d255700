// The shared parts of Tokenizer: special-token bookkeeping and the special-aware encode,
// which splits the text at special tokens and hands the stretches between them to the
// subclass's plain encode.
#include "data/tokenizer.h"

#include <algorithm>

#include "data/utf8.h"
#include "tensor/error.h"

namespace fitgrad::data {

// Note [Added-token matching]
// As Hugging Face tokenizers' AddedVocabulary: the special tokens are found leftmost-longest,
// without overlaps. A single_word token whose neighbour (the character before or after) is a
// word character (a letter, a digit or '_') is no match: its text stays ordinary text, and
// the search goes on after it. lstrip takes the white space before the token (back to the
// previous token) into it and rstrip the white space after it; that white space is not
// encoded. The stretches between are encoded by encode_part.
namespace {

bool is_word(std::string_view text, size_t pos) {
  const char32_t cp = decode_utf8(text, pos).cp;
  const CharClass c = char_class(cp);
  return c == CharClass::letter || c == CharClass::number || cp == U'_';
}
bool is_space(std::string_view text, size_t pos) {
  return char_class(decode_utf8(text, pos).cp) == CharClass::space;
}

}  // namespace

bool touches_word(std::string_view text, size_t begin, size_t end) {
  return (begin > 0 && is_word(text, utf8_start_before(text, begin))) ||
         (end < text.size() && is_word(text, end));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool allow_special) const {
  if (!allow_special || specials_.empty()) return encode(text);
  // next[i]: where specials_[i] next occurs at or after pos (npos when never again).
  std::vector<size_t> next(specials_.size());
  for (size_t i = 0; i < specials_.size(); ++i) next[i] = text.find(specials_[i].first);
  std::vector<int32_t> ids;
  size_t begin = 0;  // the stretch of ordinary text starts here
  size_t pos = 0;    // the search for the next special starts here
  while (true) {
    size_t best = std::string_view::npos;  // the earliest, then longest, special
    size_t at = std::string_view::npos;
    for (size_t i = 0; i < specials_.size(); ++i) {
      if (next[i] != std::string_view::npos && next[i] < pos)
        next[i] = text.find(specials_[i].first, pos);
      if (next[i] == std::string_view::npos) continue;
      if (at == std::string_view::npos || next[i] < at ||
          (next[i] == at && specials_[i].first.size() > specials_[best].first.size())) {
        at = next[i];
        best = i;
      }
    }
    size_t start = at, end = at;
    if (at != std::string_view::npos) {
      const AddedTokenRule& rule = rules_[best];
      end = at + specials_[best].first.size();
      if (rule.single_word && touches_word(text, at, end)) {
        pos = end;  // no match here; its text stays ordinary
        continue;
      }
      if (rule.lstrip)
        while (start > begin && is_space(text, utf8_start_before(text, start)))
          start = utf8_start_before(text, start);
      if (rule.rstrip)
        while (end < text.size() && is_space(text, end)) end += decode_utf8(text, end).length;
    }
    if (start > begin) {
      const std::string_view part = text.substr(
          begin, start == std::string_view::npos ? std::string_view::npos : start - begin);
      const std::vector<int32_t> ids_part = encode_part(part, begin == 0);
      ids.insert(ids.end(), ids_part.begin(), ids_part.end());
    }
    if (at == std::string_view::npos) break;
    ids.push_back(specials_[best].second);
    begin = pos = end;
  }
  return ids;
}

void Tokenizer::check_role(const char* role, std::optional<int32_t> id) const {
  FG_CHECK(!id || (*id >= 0 && *id < vocab_size()),
           "[tokenizer {}] {} id {} is out of range (vocab size {})", name(), role, *id,
           vocab_size());
}

void Tokenizer::set_bos(std::optional<int32_t> id) { check_role("bos", id), bos_ = id; }
void Tokenizer::set_eos(std::optional<int32_t> id) { check_role("eos", id), eos_ = id; }
void Tokenizer::set_pad(std::optional<int32_t> id) { check_role("pad", id), pad_ = id; }

std::optional<int32_t> Tokenizer::find_special(std::string_view special) const {
  for (const auto& [text, id] : specials_)
    if (text == special) return id;
  return std::nullopt;
}

int32_t Tokenizer::token_id(std::string_view special) const {
  const std::optional<int32_t> id = find_special(special);
  if (!id) {
    std::string known;
    for (const auto& s : specials_) known += (known.empty() ? "" : ", ") + s.first;
    throw Error(fmt::format("[tokenizer {}] no special token '{}' (special tokens: {})", name(),
                            special, known.empty() ? "none" : known));
  }
  return *id;
}

bool Tokenizer::is_special(int32_t id) const {
  return std::any_of(specials_.begin(), specials_.end(),
                     [id](const auto& s) { return s.second == id; });
}

void Tokenizer::add_special(std::string text, int32_t id, AddedTokenRule rule) {
  FG_CHECK(!text.empty(), "[tokenizer {}] a special token's text must not be empty", name());
  FG_CHECK(!find_special(text), "[tokenizer {}] special token '{}' is defined twice", name(), text);
  FG_CHECK(id >= 0 && id < vocab_size(),
           "[tokenizer {}] special token '{}' has id {} outside the vocabulary (size {})", name(),
           text, id, vocab_size());
  specials_.emplace_back(std::move(text), id);
  rules_.push_back(rule);
}

}  // namespace fitgrad::data
