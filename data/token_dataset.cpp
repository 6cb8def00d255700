// TokenDataset::open: list and hash the sources, map the cache when its fingerprint
// matches, otherwise check UTF-8, tokenize, join and write the cache, then map it.
#include "data/token_dataset.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <vector>

#include "data/folder_files.h"
#include "data/token_cache.h"
#include "data/utf8.h"
#include "io/content_hash.h"
#include "tensor/error.h"

namespace fitgrad::data {

namespace fs = std::filesystem;

// Note [Joining documents]: the documents (files, in the order of data/token_dataset.h)
// are tokenized one at a time, so no token spans two files, and joined with the
// tokenizer's eos id between consecutive documents when it has one (the GPT-2 BPE's
// "<|endoftext|>"), so the model sees where one text ends and the next begins. Without an
// eos (a plain ByteTokenizer) they are simply concatenated. With options.add_bos (a tokenizer
// that starts every text with its bos, as Llama's and Gemma's do: Note [The bos a text starts
// with] in hf_tokenizer.cpp) each document starts with the bos, as transformers'
// tokenizer(document) gives it; otherwise nothing is added before the first or after the last
// document, so a single file's stream is exactly tok.encode(text).
// A 0-byte file joins nothing (no eos for it), though it is part of the fingerprint.
//
// Note [Validation split]: with n tokens, the last llround(val_fraction * n) are the
// validation split and the rest is training: a held-out tail, not a sample, so no
// validation window overlaps a training window and the split does not depend on a seed.
// Whether a split is long enough depends on the loader's seq_len and batch_size, so the
// Loader checks it (data/loader.h), naming the split.

namespace {

struct SourceFile {
  std::string path;      // as opened
  std::string relative;  // in the fingerprint: the path below the folder, or the file name
  io::MappedFile file;
  uint64_t hash = 0;
};

// The documents of `source` in join order, not yet mapped.
std::vector<SourceFile> list_sources(const fs::path& source, const std::string& where) {
  std::error_code ec;
  const fs::file_status status = fs::status(source, ec);
  FG_CHECK(fs::exists(status), "{} no such file or folder", where);
  if (fs::is_regular_file(status)) {
    return {SourceFile{source.string(), source.filename().string(), {}, 0}};
  }
  FG_CHECK(fs::is_directory(status), "{} is neither a regular file nor a folder", where);
  std::vector<SourceFile> files;
  for (const std::string& relative : folder_files_of(source, DataKind::text, where))
    files.push_back({(source / relative).string(), relative, {}, 0});
  FG_CHECK(!files.empty(), "{} holds no .txt files (hidden ones are skipped)", where);
  return files;
}

// Throws naming the file, byte offset and line of the first ill-formed UTF-8 sequence.
void check_utf8(std::string_view text, const std::string& path) {
  if (is_valid_utf8(text)) return;
  size_t pos = 0;
  while (pos < text.size()) {
    const Utf8Char c = decode_utf8(text, pos);
    if (c.cp == kInvalidCodePoint) break;
    pos += c.length;
  }
  FG_ASSERT(pos < text.size());
  const auto line = 1 + std::count(text.begin(), text.begin() + ptrdiff_t(pos), '\n');
  throw Error(fmt::format(
      "[data {}] is not valid UTF-8: the sequence at byte offset {} (line {}) starting with "
      "byte 0x{:02x} is ill-formed",
      path, pos, line, uint8_t(text[pos])));
}

std::string fingerprint(const std::vector<SourceFile>& files, const Tokenizer& tok,
                        const std::string& tokenizer_id, std::optional<int32_t> bos) {
  std::string fp = fmt::format("fitgrad token cache\ntokenizer {} {}\nvocab {}\neos {}\nfiles {}\n",
                               tokenizer_id.size(), tokenizer_id, tok.vocab_size(),
                               tok.eos().value_or(-1), files.size());
  if (bos) fp += fmt::format("bos {}\n", *bos);
  for (const SourceFile& f : files) {
    fp += fmt::format("file {} {:016x} {} {}\n", f.file.size(), f.hash, f.relative.size(),
                      f.relative);
  }
  return fp;
}

std::string cache_file_name(const fs::path& absolute_source, const std::string& tokenizer_id) {
  std::string name = tokenizer_id;
  for (char& c : name) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    if (!keep) c = '_';
  }
  const uint64_t key = io::content_hash(absolute_source.string() + '\0' + tokenizer_id);
  return fmt::format("{}-{:016x}.tokens", name, key);
}

std::vector<int32_t> tokenize(const std::vector<SourceFile>& files, const Tokenizer& tok,
                              std::optional<int32_t> bos) {
  std::vector<int32_t> tokens;
  bool first = true;
  for (const SourceFile& f : files) {
    if (f.file.size() == 0) continue;
    check_utf8(f.file.bytes(), f.path);
    if (!first && tok.eos()) tokens.push_back(*tok.eos());
    if (bos) tokens.push_back(*bos);
    const std::vector<int32_t> ids = tok.encode(f.file.bytes());
    tokens.insert(tokens.end(), ids.begin(), ids.end());
    first = false;
  }
  return tokens;
}

}  // namespace

TokenDataset TokenDataset::open(const std::string& source, const Tokenizer& tok,
                                const std::string& tokenizer_id,
                                const TokenDatasetOptions& options) {
  const std::string where = fmt::format("[data {}]", source);
  FG_CHECK(!tokenizer_id.empty(), "{} the tokenizer id is empty", where);
  FG_CHECK(options.val_fraction >= 0.0 && options.val_fraction < 1.0,
           "{} val_fraction {} is not in [0, 1)", where, options.val_fraction);

  std::vector<SourceFile> files = list_sources(source, where);
  uint64_t total_bytes = 0;
  TokenDataset ds;
  for (SourceFile& f : files) {
    f.file = io::MappedFile::open(f.path, where);
    f.hash = io::content_hash(f.file.bytes());
    total_bytes += f.file.size();
    ds.num_documents_ += f.file.size() > 0 ? 1 : 0;
  }
  FG_CHECK(total_bytes > 0, "{} is empty: 0 bytes of text in {} file(s)", where, files.size());
  const std::optional<int32_t> bos = options.add_bos ? tok.bos() : std::nullopt;
  const std::string fp = fingerprint(files, tok, tokenizer_id, bos);

  fs::path absolute = fs::absolute(source).lexically_normal();
  if (absolute.filename().empty()) absolute = absolute.parent_path();  // "corpus/" -> "corpus"
  const fs::path dir = options.cache_dir.empty() ? fs::path(absolute.string() + ".fitgrad-cache")
                                                 : fs::path(options.cache_dir);
  ds.source_ = source;
  ds.cache_path_ = (dir / cache_file_name(absolute, tokenizer_id)).string();

  std::optional<MappedTokens> cached = map_token_cache(ds.cache_path_, fp);
  if (!cached) {
    // The folder is made only once the text has tokenized, and removed again if it stays
    // empty, so a failed run leaves nothing beside the user's data.
    const std::vector<int32_t> tokens = tokenize(files, tok, bos);
    std::error_code ec;
    const bool made = fs::create_directories(dir, ec);
    FG_CHECK(!ec, "{} cannot create the cache folder {}: {}", where, dir.string(), ec.message());
    try {
      write_token_cache(ds.cache_path_, fp, tokens, where);
    } catch (...) {
      if (made && fs::is_empty(dir, ec)) fs::remove(dir, ec);
      throw;
    }
    cached = map_token_cache(ds.cache_path_, fp);
    FG_CHECK(cached.has_value(), "{} the cache {} does not read back after writing it", where,
             ds.cache_path_);
    ds.built_ = true;
  }
  ds.file_ = std::move(cached->file);
  ds.tokens_ = cached->tokens;
  const auto n = int64_t(ds.tokens_.size());
  ds.split_ = n - std::llround(options.val_fraction * double(n));
  return ds;
}

}  // namespace fitgrad::data
