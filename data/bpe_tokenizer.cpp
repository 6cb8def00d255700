// BpeTokenizer: loading GPT-2's files and GGUF-style token/merge lists, the merge loop,
// and GPT-2's byte alphabet.
//
// (Note [BPE merge loop] in bpe_merges.cpp.)
#include "data/bpe_tokenizer.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "data/nfc.h"
#include "io/json_depth.h"
#include "tensor/error.h"

namespace fitgrad::data {
namespace {

// ---- GPT-2's byte alphabet: printable Latin-1 bytes stand for themselves, the other 68
// bytes take U+0100.. in byte order. ----
constexpr bool alphabet_printable(int b) {
  return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}
constexpr int kAlphabetSpan = 256 + 68;  // code points 0..323

struct Alphabet {
  std::array<char32_t, 256> to_unicode{};
  std::array<int16_t, kAlphabetSpan> to_byte{};
  Alphabet() {
    to_byte.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      to_unicode[b] = alphabet_printable(b) ? char32_t(b) : char32_t(256 + extra++);
      to_byte[to_unicode[b]] = int16_t(b);
    }
  }
};
const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  FG_CHECK(in.good(), "[{}] cannot open: {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The 1-based line and column of byte offset pos in text.
std::pair<size_t, size_t> line_col(std::string_view text, size_t pos) {
  pos = std::min(pos, text.size());
  const size_t line = 1 + size_t(std::count(text.begin(), text.begin() + pos, '\n'));
  const size_t nl = text.substr(0, pos).rfind('\n');
  return {line, pos - (nl == std::string_view::npos ? 0 : nl + 1) + 1};
}

}  // namespace

char32_t gpt2_byte_to_unicode(uint8_t byte) { return alphabet().to_unicode[byte]; }

std::string gpt2_bytes_to_unicode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) append_utf8(out, alphabet().to_unicode[static_cast<uint8_t>(c)]);
  return out;
}

std::optional<std::string> gpt2_unicode_to_bytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char c = decode_utf8(text, pos);
    if (c.cp >= char32_t(kAlphabetSpan) || alphabet().to_byte[c.cp] < 0) return std::nullopt;
    out += static_cast<char>(alphabet().to_byte[c.cp]);
    pos += c.length;
  }
  return out;
}

std::string gpt2_asset_dir() {
  if (const char* env = std::getenv("FITGRAD_ASSETS"); env != nullptr && *env != '\0')
    return std::string(env) + "/gpt2";
#ifdef FITGRAD_ASSET_DIR
  return std::string(FITGRAD_ASSET_DIR) + "/gpt2";
#else
  throw Error(
      "[tokenizer] cannot find GPT-2's files: set FITGRAD_ASSETS to the folder that holds "
      "gpt2/encoder.json (data/assets in fitgrad's source tree)");
#endif
}

// ---- construction ----

BpeTokenizer BpeTokenizer::build(std::vector<std::string> tokens,
                                 const std::vector<std::string>& merges, PreTokenizer pre,
                                 BpeVocabOptions options, const Where& token_where,
                                 const Where& merge_where) {
  BpeTokenizer t;
  t.name_ = options.name;
  t.pre_ = pre;
  const std::string who = fmt::format("[tokenizer {}]", t.name_);
  const size_t n = tokens.size();
  FG_CHECK(n > 0 && n < size_t(INT32_MAX), "{} the vocabulary has {} tokens", who, n);
  FG_CHECK(options.token_types.empty() || options.token_types.size() == n,
           "{} {} token types for {} tokens", who, options.token_types.size(), n);

  std::unordered_map<std::string_view, int32_t> id_of;  // the first token with a text wins
  id_of.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) id_of.emplace(tokens[i], int32_t(i));

  std::vector<char> special(n, 0);
  for (size_t i = 0; i < options.token_types.size(); ++i)
    special[i] = options.token_types[i] == 3 || options.token_types[i] == 4;
  for (const auto& [role, id] : {std::pair{"bos", options.bos}, std::pair{"eos", options.eos},
                                 std::pair{"pad", options.pad}}) {
    FG_CHECK(!id || (*id >= 0 && size_t(*id) < n), "{} {} id {} is outside the vocabulary ({})",
             who, role, *id, n);
    if (id) special[size_t(*id)] = 1;
  }
  for (const std::string& text : options.specials) {
    const auto it = id_of.find(text);
    FG_CHECK(it != id_of.end(), "{} special token '{}' is not in the vocabulary", who, text);
    special[size_t(it->second)] = 1;
  }

  // Token bytes: special tokens verbatim, the rest through the byte alphabet.
  t.byte_token_.fill(-1);
  t.offsets_.reserve(n + 1);
  t.offsets_.push_back(0);
  for (size_t i = 0; i < n; ++i) {
    if (special[i]) {
      t.bytes_ += tokens[i];
    } else {
      const std::optional<std::string> bytes = gpt2_unicode_to_bytes(tokens[i]);
      FG_CHECK(bytes.has_value(), "{} '{}': a character is not in GPT-2's byte alphabet",
               token_where(i), tokens[i]);
      if (bytes->size() == 1 && t.byte_token_[uint8_t((*bytes)[0])] < 0)
        t.byte_token_[uint8_t((*bytes)[0])] = int32_t(i);
      t.bytes_ += *bytes;
    }
    FG_CHECK(t.bytes_.size() < size_t(UINT32_MAX), "{} the vocabulary is too large", who);
    t.offsets_.push_back(uint32_t(t.bytes_.size()));
  }

  // Merges, in rank order; a pair listed twice keeps its first rank.
  t.merges_ = BpeMerges::parse(merges, id_of, merge_where);
  t.merge_count_ = int32_t(merges.size());
  t.nfc_ = options.nfc;
  if (options.ignore_merges)
    for (size_t i = 0; i < n; ++i)
      if (!special[i]) t.whole_token_.emplace(std::string(t.token_bytes(int32_t(i))), int32_t(i));

  for (size_t i = 0; i < n; ++i) {
    if (!special[i]) continue;
    const std::string_view text = t.token_bytes(int32_t(i));
    const auto rule = options.rules.find(int32_t(i));
    if (!text.empty() && !t.find_special(text))
      t.add_special(std::string(text), int32_t(i),
                    rule == options.rules.end() ? AddedTokenRule{} : rule->second);
  }
  t.set_bos(options.bos);
  t.set_eos(options.eos);
  t.set_pad(options.pad);
  return t;
}

BpeTokenizer BpeTokenizer::from_vocab(std::vector<std::string> tokens,
                                      const std::vector<std::string>& merges, PreTokenizer pre,
                                      BpeVocabOptions options) {
  const std::string name = options.name;
  const auto token_where = [&](size_t i) {
    return fmt::format("[tokenizer {}] token {}", name, i);
  };
  const auto merge_where = [&](size_t r) {
    return fmt::format("[tokenizer {}] merge {}", name, r);
  };
  return build(std::move(tokens), merges, pre, std::move(options), token_where, merge_where);
}

BpeTokenizer BpeTokenizer::from_gpt2_files(const std::string& encoder_json_path,
                                           const std::string& vocab_bpe_path) {
  // encoder.json: one object, token text -> id, ids 0..N-1 each once.
  const std::string json_text = read_file(encoder_json_path);
  nlohmann::json json;
  try {
    json = io::parse_json<nlohmann::json>(json_text, fmt::format("[{}]", encoder_json_path));
  } catch (const nlohmann::json::parse_error& e) {
    const auto [line, col] = line_col(json_text, e.byte > 0 ? e.byte - 1 : 0);
    throw Error(
        fmt::format("[{}:{}:{}] malformed JSON: {}", encoder_json_path, line, col, e.what()));
  } catch (const nlohmann::json::exception& e) {
    // Well-formed text the parser still refuses, such as a number beyond double's range.
    throw Error(fmt::format("[{}] unreadable JSON: {}", encoder_json_path, e.what()));
  }
  FG_CHECK(json.is_object() && !json.empty(),
           "[{}] expected a JSON object mapping token text to id", encoder_json_path);
  std::vector<std::string> tokens(json.size());
  std::vector<char> seen(json.size(), 0);
  for (const auto& [text, value] : json.items()) {
    FG_CHECK(value.is_number_integer(), "[{}] token '{}' has id {}, not an integer",
             encoder_json_path, text, value.dump());
    const int64_t id = value.get<int64_t>();
    FG_CHECK(id >= 0 && size_t(id) < tokens.size(),
             "[{}] token '{}' has id {}; the {} ids must be 0..{}", encoder_json_path, text, id,
             tokens.size(), tokens.size() - 1);
    FG_CHECK(!seen[size_t(id)], "[{}] id {} is given to both '{}' and '{}'", encoder_json_path, id,
             tokens[size_t(id)], text);
    seen[size_t(id)] = 1;
    tokens[size_t(id)] = text;
  }

  // vocab.bpe: an optional "#version" line, then one "left right" merge per line.
  const std::string bpe_text = read_file(vocab_bpe_path);
  std::vector<std::string> merges;
  std::vector<size_t> merge_lines;
  size_t line_no = 0;
  for (size_t pos = 0; pos < bpe_text.size();) {
    size_t end = bpe_text.find('\n', pos);
    if (end == std::string::npos) end = bpe_text.size();
    std::string_view line(bpe_text.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_no == 1 && line.starts_with("#version"))) continue;
    merges.emplace_back(line);
    merge_lines.push_back(line_no);
  }
  FG_CHECK(!merges.empty(), "[{}] has no merges", vocab_bpe_path);

  BpeVocabOptions options;
  options.name = "gpt2";
  const bool has_eot = json.contains("<|endoftext|>");
  if (has_eot) options.specials = {"<|endoftext|>"};
  const auto token_where = [&](size_t i) {
    return fmt::format("[{}] token {}", encoder_json_path, i);
  };
  const auto merge_where = [&](size_t r) {
    return fmt::format("[{}:{}]", vocab_bpe_path, merge_lines[r]);
  };
  BpeTokenizer t = build(std::move(tokens), merges, PreTokenizer::gpt2, std::move(options),
                         token_where, merge_where);
  if (has_eot) {
    t.set_bos(t.token_id("<|endoftext|>"));
    t.set_eos(t.token_id("<|endoftext|>"));
  }
  return t;
}

BpeTokenizer BpeTokenizer::gpt2(const std::string& dir) {
  return from_gpt2_files(dir + "/encoder.json", dir + "/vocab.bpe");
}

// ---- encode / decode ----

std::string_view BpeTokenizer::token_bytes(int32_t id) const {
  FG_CHECK(id >= 0 && id < vocab_size(), "[tokenizer {}] unknown token id {} (vocab size {})",
           name_, id, vocab_size());
  return std::string_view(bytes_).substr(offsets_[size_t(id)],
                                         offsets_[size_t(id) + 1] - offsets_[size_t(id)]);
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  const size_t n = piece.size();
  if (n == 0) return;
  if (!whole_token_.empty()) {
    if (const auto it = whole_token_.find(std::string(piece)); it != whole_token_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  constexpr size_t kStack = 64;
  int32_t stack[kStack];
  std::vector<int32_t> heap;
  int32_t* ids = stack;
  if (n > kStack) heap.resize(n), ids = heap.data();
  for (size_t i = 0; i < n; ++i) {
    const auto byte = static_cast<uint8_t>(piece[i]);
    ids[i] = byte_token_[byte];
    FG_CHECK(ids[i] >= 0, "[tokenizer {}] byte 0x{:02X} has no token in the vocabulary", name_,
             byte);
  }
  merges_.apply(ids, n, out);
}

// Note [Word cache]
// Natural text repeats its words, so encode() remembers, for the duration of one call, where
// in its output each piece's ids were first written and copies them from there the next
// time. The cache is local to the call: the tokenizer stays immutable and thread-safe.
std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  return nfc_ ? encode_normalized(nfc(text)) : encode_normalized(text);
}

std::vector<int32_t> BpeTokenizer::encode_normalized(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  struct Span {
    uint32_t begin, count;
  };
  std::unordered_map<std::string_view, Span> seen;
  constexpr size_t kMaxCached = 1 << 16;  // pieces; bounds the cache on huge texts
  pre_tokenize(pre_, text, [&](std::string_view piece) {
    if (piece.size() == 1) return encode_piece(piece, out);
    if (const auto it = seen.find(piece); it != seen.end()) {
      const size_t end = out.size();
      out.resize(end + it->second.count);  // before taking iterators: it may reallocate
      std::copy_n(out.begin() + it->second.begin, it->second.count, out.begin() + end);
      return;
    }
    const size_t begin = out.size();
    encode_piece(piece, out);
    if (seen.size() < kMaxCached && out.size() < size_t(UINT32_MAX))
      seen.emplace(piece, Span{uint32_t(begin), uint32_t(out.size() - begin)});
  });
  return out;
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  out.reserve(ids.size() * 4);
  for (const int32_t id : ids) {
    FG_CHECK(id >= 0 && id < vocab_size(),
             "[tokenizer {}] decode: unknown token id {} (vocab size {})", name_, id, vocab_size());
    out.append(bytes_, offsets_[size_t(id)], offsets_[size_t(id) + 1] - offsets_[size_t(id)]);
  }
  return out;
}

}  // namespace fitgrad::data
