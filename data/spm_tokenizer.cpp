// SpmTokenizer (spm_tokenizer.h).
//
// Note [SentencePiece pipelines]
// Hugging Face tokenizers runs a SentencePiece-style BPE as: added tokens cut out of the raw
// text (Tokenizer::encode, Note [Added-token matching]); each stretch between them
// normalized on its own; added tokens with normalized=true cut out of the normalized
// stretch; the pre-tokenizer; BPE on each word. The families differ in two places:
//   Llama 2, Mistral v0.1, Phi-3 (and transformers' legacy=True): normalizer
//       Sequence[Prepend("▁"), Replace(" ", "▁")]: every non-empty stretch gets a "▁", even
//       one that starts with a space (" Hi" -> "▁▁Hi") or follows a special token;
//       decoder Sequence[Replace("▁", " "), ByteFallback, Fuse, Strip(" ", 1, 0)], which
//       drops one leading space of the whole text;
//   Mistral v0.3 (legacy=False): no normalizer; pre-tokenizer Metaspace(prepend_scheme
//       "first"): spaces become "▁", and only the stretch at the start of the text gets a
//       "▁", unless it already starts with one; "always" gives it to every stretch;
//   Gemma: normalizer Replace(" ", "▁") alone, no prefix, decoder without Strip.
// A GGUF file's "llama" tokenizer (llama.cpp) prefixes each stretch when
// tokenizer.ggml.add_space_prefix (the default) and strips the decoded text's first space:
// Llama 2's legacy rules.
// BPE: each character of a word is its token; one that has none is its UTF-8 bytes as
// <0xXX> tokens (byte_fallback, when all of them exist), else <unk> (consecutive ones fused
// into one with fuse_unk), else nothing, as tokenizers does. The ranked merges then apply
// (Note [BPE merge loop] in bpe_merges.cpp). With no pre-tokenizer a word is the whole
// stretch; since such vocabularies never have a "▁" inside a token after another character,
// a stretch is cut before each such "▁" (cut_words_) without changing any result, and
// repeated words are encoded once per call.
// Decoding writes each token's text with "▁" as a space and byte tokens as their bytes.
// tokenizers would turn a run of byte tokens that is not valid UTF-8 into U+FFFD characters;
// fitgrad keeps the bytes (Tokenizer::decode), which is the same on valid text.
#include "data/spm_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "data/utf8.h"
#include "tensor/error.h"

namespace fitgrad::data {
namespace {

constexpr std::string_view kMeta = "\xE2\x96\x81";  // U+2581, "▁"

std::string replace_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  for (const char c : text) {
    if (c == ' ')
      out += kMeta;
    else
      out += c;
  }
  return out;
}

}  // namespace

int spm_byte_token(std::string_view text) {
  if (text.size() != 6 || !text.starts_with("<0x") || text.back() != '>') return -1;
  int value = 0;
  for (const char c : text.substr(3, 2)) {
    if (c >= '0' && c <= '9')
      value = value * 16 + (c - '0');
    else if (c >= 'A' && c <= 'F')
      value = value * 16 + (c - 'A' + 10);
    else
      return -1;
  }
  return value;
}

SpmTokenizer SpmTokenizer::from_vocab(std::vector<std::string> tokens,
                                      const std::vector<std::string>& merges, SpmOptions options) {
  SpmTokenizer t;
  const std::string who = fmt::format("[tokenizer {}]", options.name);
  const size_t n = tokens.size();
  FG_CHECK(n > 0 && n < size_t(INT32_MAX), "{} the vocabulary has {} tokens", who, n);
  FG_CHECK(options.token_types.empty() || options.token_types.size() == n,
           "{} {} token types for {} tokens", who, options.token_types.size(), n);
  std::vector<int32_t> types = options.token_types;
  if (types.empty()) types.assign(n, 1);
  std::unordered_map<std::string_view, int32_t> id_of;  // the first token with a text wins
  id_of.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) id_of.emplace(tokens[i], int32_t(i));

  t.byte_token_.fill(-1);
  t.output_.resize(n);
  t.is_byte_.assign(n, 0);
  t.cut_words_ = !options.ignore_merges && !options.metaspace_split;
  for (size_t i = 0; i < n; ++i) {
    const std::string& text = tokens[i];
    // A normal token spelled <0xXX> is a byte too: tokenizer.json has no token types, and
    // tokenizers' ByteFallback decodes any such token as its byte.
    const int byte = types[i] == 6 || types[i] == 1 ? spm_byte_token(text) : -1;
    FG_CHECK(types[i] != 6 || byte >= 0, "{} token {} '{}' is a byte token but not <0xXX>", who, i,
             text);
    if (byte >= 0) {
      t.is_byte_[i] = 1;
      t.output_[i] = std::string(1, char(byte));
      if (t.byte_token_[size_t(byte)] < 0) t.byte_token_[size_t(byte)] = int32_t(i);
      continue;
    }
    std::string out;
    for (size_t pos = 0; pos < text.size();) {
      if (std::string_view(text).substr(pos).starts_with(kMeta)) {
        // A "▁" after another character: a merge could cross a cut there.
        if (pos > 0 && !std::string_view(text).substr(0, pos).ends_with(kMeta) &&
            (types[i] == 1 || types[i] == 5))
          t.cut_words_ = false;
        out += ' ';
        pos += kMeta.size();
      } else {
        out += text[pos++];
      }
    }
    t.output_[i] = std::move(out);
    if (!text.empty() && decode_utf8(text, 0).length == text.size() &&
        decode_utf8(text, 0).cp != kInvalidCodePoint)
      t.char_token_.emplace(text, int32_t(i));
    if (options.ignore_merges && (types[i] == 1 || types[i] == 5))
      t.whole_token_.emplace(text, int32_t(i));
  }

  t.merges_ =
      BpeMerges::parse(merges, id_of, [&](size_t r) { return fmt::format("{} merge {}", who, r); });

  for (const auto& [role, id] : {std::pair{"bos", options.bos}, std::pair{"eos", options.eos},
                                 std::pair{"pad", options.pad}, std::pair{"unk", options.unk}}) {
    FG_CHECK(!id || (*id >= 0 && size_t(*id) < n), "{} {} id {} is outside the vocabulary ({})",
             who, role, *id, n);
  }
  t.texts_ = std::move(tokens);
  t.options_ = std::move(options);
  const auto normalized = [&](int32_t id) {
    return std::find(t.options_.normalized_added.begin(), t.options_.normalized_added.end(), id) !=
           t.options_.normalized_added.end();
  };
  for (size_t i = 0; i < n; ++i) {
    const bool special = types[i] == 2 || types[i] == 3 || types[i] == 4;
    if (!special || t.texts_[i].empty() || t.find_special(t.texts_[i])) continue;
    const auto rule = t.options_.rules.find(int32_t(i));
    if (normalized(int32_t(i))) {
      // Matched in the normalized text, where its own text is normalized too.
      std::string text = t.texts_[i];
      if (t.options_.normalizer_prepend) text.insert(0, kMeta);
      if (t.options_.normalizer_replace) text = replace_spaces(text);
      t.normalized_.emplace_back(std::move(text), int32_t(i));
      continue;
    }
    t.add_special(t.texts_[i], int32_t(i),
                  rule == t.options_.rules.end() ? AddedTokenRule{} : rule->second);
  }
  t.set_bos(t.options_.bos);
  t.set_eos(t.options_.eos);
  t.set_pad(t.options_.pad);
  return t;
}

std::vector<std::string> SpmTokenizer::merges_from_scores(const std::vector<std::string>& tokens,
                                                          const std::vector<float>& scores,
                                                          const std::vector<int32_t>& types) {
  FG_CHECK(scores.size() == tokens.size(), "[tokenizer] {} scores for {} tokens", scores.size(),
           tokens.size());
  std::unordered_map<std::string_view, int32_t> id_of;
  for (size_t i = 0; i < tokens.size(); ++i) id_of.emplace(tokens[i], int32_t(i));
  const auto mergeable = [&](size_t i) { return types.empty() || types[i] == 1 || types[i] == 5; };
  // (score of the merged token, its id, the split point) of every pair of tokens whose text
  // is a mergeable token.
  std::vector<std::tuple<float, int32_t, size_t>> found;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!mergeable(i) || spm_byte_token(tokens[i]) >= 0) continue;
    const std::string_view text = tokens[i];
    for (size_t cut = decode_utf8(text, 0).length; cut < text.size();
         cut += decode_utf8(text, cut).length) {
      const auto l = id_of.find(text.substr(0, cut)), r = id_of.find(text.substr(cut));
      if (l != id_of.end() && r != id_of.end() && mergeable(size_t(l->second)) &&
          mergeable(size_t(r->second)))
        found.emplace_back(scores[i], int32_t(i), cut);
    }
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    return std::get<0>(a) != std::get<0>(b) ? std::get<0>(a) > std::get<0>(b)
                                            : std::get<1>(a) < std::get<1>(b);
  });
  std::vector<std::string> merges;
  merges.reserve(found.size());
  for (const auto& [score, id, cut] : found) {
    const std::string& text = tokens[size_t(id)];
    merges.push_back(text.substr(0, cut) + " " + text.substr(cut));
  }
  return merges;
}

const std::string& SpmTokenizer::token_text(int32_t id) const {
  FG_CHECK(id >= 0 && id < vocab_size(), "[tokenizer {}] unknown token id {} (vocab size {})",
           name(), id, vocab_size());
  return texts_[size_t(id)];
}

std::vector<int32_t> SpmTokenizer::encode_part(std::string_view text, bool at_start) const {
  std::vector<int32_t> out;
  if (text.empty()) return out;
  std::string norm(text);
  if (options_.normalizer_replace) norm = replace_spaces(norm);
  if (options_.normalizer_prepend) norm.insert(0, kMeta);
  const std::string_view s = norm;
  // Added tokens with normalized=true, leftmost-longest in the normalized text.
  size_t begin = 0, pos = 0;
  while (!normalized_.empty()) {
    size_t at = std::string_view::npos, best = 0;
    for (size_t i = 0; i < normalized_.size(); ++i) {
      const size_t found = s.find(normalized_[i].first, pos);
      if (found != std::string_view::npos &&
          (found < at ||
           (found == at && normalized_[i].first.size() > normalized_[best].first.size())))
        at = found, best = i;
    }
    if (at == std::string_view::npos) break;
    const size_t end = at + normalized_[best].first.size();
    const auto rule = options_.rules.find(normalized_[best].second);
    if (rule != options_.rules.end() && rule->second.single_word) {
      if (touches_word(s, at, end)) {
        pos = end;
        continue;
      }
    }
    if (at > begin) encode_piece(s.substr(begin, at - begin), at_start && begin == 0, out);
    out.push_back(normalized_[best].second);
    begin = pos = end;
  }
  if (begin < s.size()) encode_piece(s.substr(begin), at_start && begin == 0, out);
  return out;
}

void SpmTokenizer::encode_piece(std::string_view piece, bool at_text_start,
                                std::vector<int32_t>& out) const {
  std::string buffer;
  if (options_.metaspace != SpmOptions::Metaspace::none) {
    buffer = replace_spaces(piece);
    const bool prefix = options_.metaspace == SpmOptions::Metaspace::always ||
                        (options_.metaspace == SpmOptions::Metaspace::first && at_text_start);
    if (prefix && !std::string_view(buffer).starts_with(kMeta)) buffer.insert(0, kMeta);
    piece = buffer;
  }
  const bool cut = options_.metaspace_split || cut_words_;
  if (!cut) return encode_word(piece, out);
  // Words: a cut before each "▁" (metaspace split), or before each "▁" after another character.
  std::unordered_map<std::string_view, std::pair<size_t, size_t>> seen;  // word -> ids in out
  size_t start = 0;
  for (size_t i = 0; i <= piece.size();) {
    const bool at_meta = i < piece.size() && piece.substr(i).starts_with(kMeta);
    const bool boundary =
        i == piece.size() || (at_meta && i > start &&
                              (options_.metaspace_split || !piece.substr(0, i).ends_with(kMeta)));
    if (boundary && i > start) {
      const std::string_view word = piece.substr(start, i - start);
      if (const auto it = seen.find(word); it != seen.end()) {
        const size_t end = out.size();
        out.resize(end + it->second.second);
        std::copy_n(out.begin() + std::ptrdiff_t(it->second.first), it->second.second,
                    out.begin() + std::ptrdiff_t(end));
      } else {
        const size_t first = out.size();
        encode_word(word, out);
        seen.emplace(word, std::pair{first, out.size() - first});
      }
      start = i;
    }
    if (i == piece.size()) break;
    i += at_meta ? kMeta.size() : decode_utf8(piece, i).length;
  }
}

void SpmTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (!whole_token_.empty()) {
    if (const auto it = whole_token_.find(std::string(word)); it != whole_token_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  std::vector<int32_t> ids;
  ids.reserve(word.size());
  bool last_unk = false;
  std::string ch;
  for (size_t pos = 0; pos < word.size();) {
    const Utf8Char c = decode_utf8(word, pos);
    ch.assign(word.substr(pos, c.length));
    pos += c.length;
    if (const auto it = char_token_.find(ch); it != char_token_.end()) {
      ids.push_back(it->second);
      last_unk = false;
      continue;
    }
    if (options_.byte_fallback &&
        std::all_of(ch.begin(), ch.end(), [&](char b) { return byte_token_[uint8_t(b)] >= 0; })) {
      for (const char b : ch) ids.push_back(byte_token_[uint8_t(b)]);
      last_unk = false;
      continue;
    }
    if (!options_.unk) continue;  // tokenizers drops a character it cannot write
    if (!(options_.fuse_unk && last_unk)) ids.push_back(*options_.unk);
    last_unk = true;
  }
  if (!ids.empty()) merges_.apply(ids.data(), ids.size(), out);
}

std::string SpmTokenizer::decode_ids(const std::vector<int32_t>& ids, bool at_start) const {
  std::string out;
  out.reserve(ids.size() * 4);
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    FG_CHECK(id >= 0 && id < vocab_size(),
             "[tokenizer {}] decode: unknown token id {} (vocab size {})", name(), id,
             vocab_size());
    if (at_start && i == 0 && options_.decoder == SpmOptions::Decoder::metaspace &&
        !is_byte_[size_t(id)]) {
      const std::string& o = output_[size_t(id)];
      std::copy_if(o.begin(), o.end(), std::back_inserter(out), [](char c) { return c != ' '; });
      continue;
    }
    out += output_[size_t(id)];
  }
  if (at_start && options_.decoder == SpmOptions::Decoder::strip && !out.empty() &&
      out.front() == ' ')
    out.erase(0, 1);
  return out;
}

std::string SpmTokenizer::decode(const std::vector<int32_t>& ids) const {
  return decode_ids(ids, true);
}

std::string SpmTokenizer::decode_continuation(const std::vector<int32_t>& ids) const {
  return decode_ids(ids, false);
}

}  // namespace fitgrad::data
