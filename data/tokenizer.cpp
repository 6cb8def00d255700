// The shared parts of Tokenizer: special-token bookkeeping and the special-aware encode,
// which splits the text at special tokens and hands the stretches between them to the
// subclass's plain encode.
#include "data/tokenizer.h"

#include <algorithm>

#include "tensor/error.h"

namespace fitgrad::data {

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool allow_special) const {
  if (!allow_special || specials_.empty()) return encode(text);
  // next[i]: where specials_[i] next occurs at or after pos (npos when never again).
  std::vector<size_t> next(specials_.size());
  for (size_t i = 0; i < specials_.size(); ++i) next[i] = text.find(specials_[i].first);
  std::vector<int32_t> ids;
  size_t pos = 0;
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
    const std::vector<int32_t> part =
        encode(text.substr(pos, at == std::string_view::npos ? std::string_view::npos : at - pos));
    ids.insert(ids.end(), part.begin(), part.end());
    if (at == std::string_view::npos) break;
    ids.push_back(specials_[best].second);
    pos = at + specials_[best].first.size();
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

void Tokenizer::add_special(std::string text, int32_t id) {
  FG_CHECK(!text.empty(), "[tokenizer {}] a special token's text must not be empty", name());
  FG_CHECK(!find_special(text), "[tokenizer {}] special token '{}' is defined twice", name(), text);
  FG_CHECK(id >= 0 && id < vocab_size(),
           "[tokenizer {}] special token '{}' has id {} outside the vocabulary (size {})", name(),
           text, id, vocab_size());
  specials_.emplace_back(std::move(text), id);
}

}  // namespace fitgrad::data
