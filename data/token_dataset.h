// Token datasets: a text file, or a folder of text files, tokenized once into a cache file
// (data/token_cache.h) that every later open memory-maps, split into a training stream and
// a held-out validation tail.
//
//   TokenDataset ds = TokenDataset::open("corpus/", tok, "gpt2");
//   Loader train(ds.train(), options);   // data/loader.h
//
// Sources. A file is one document. A folder contributes every regular file whose name ends
// in ".txt" (in any case), found recursively, skipping hidden entries (a file or folder whose
// name starts with '.'), in byte order of their paths relative to the folder; a folder that
// also holds .jsonl/.json records is refused (Note [One kind of data a folder] in
// data/folder_files.cpp). Each document must
// be valid UTF-8. Documents are joined as Note [Joining documents] in token_dataset.cpp
// says: with the tokenizer's eos token between them when it has one.
//
// The cache. Its file is "<tokenizer id>-<hash>.tokens" (the id with characters other
// than [A-Za-z0-9._-] as '_', the hash of the absolute source path and the id, so one cache
// folder may serve many sources and tokenizers) inside options.cache_dir, or by default
// inside "<source>.fitgrad-cache/" beside the source file or folder. The folder is created
// when missing and must be writable. The cache holds a fingerprint of the sources (each
// file's relative path, size and content hash) and of the tokenizer (the caller's id, the
// vocabulary size and the eos id). Every open hashes the sources again; a changed file,
// a changed file list or another tokenizer id makes the cache stale, and it is rebuilt, as
// is a truncated or corrupt cache. Opening never trusts file times.
//
// The split (Note [Validation split] in token_dataset.cpp) is computed on every open from
// val_fraction and is not part of the cache, so changing it never re-tokenizes.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "data/tokenizer.h"
#include "io/mapped_file.h"

namespace fitgrad::data {

struct TokenDatasetOptions {
  // The folder of the cache file; "" = "<source>.fitgrad-cache" beside the source.
  std::string cache_dir;
  // The last val_fraction of the token stream is the validation split; in [0, 1).
  double val_fraction = 0.05;
  // Each document starts with the tokenizer's bos, as transformers' tokenizer(text) starts it
  // when the tokenizer adds one (data::vocabulary_adds_bos; Note [Joining documents]).
  bool add_bos = false;
};

class TokenDataset {
 public:
  // tokenizer_id names the tokenizer exactly ("byte", "gpt2", "gguf:<sha256>") and is part
  // of the cache key: two tokenizers that encode differently must have different ids.
  // Throws fitgrad::Error starting with "[data <path>]" for a missing source, an empty one
  // (0 bytes in all, or a folder with no .txt files), a document that is not UTF-8 (naming
  // the file, byte offset and line), or a cache folder that cannot be written.
  static TokenDataset open(const std::string& source, const Tokenizer& tok,
                           const std::string& tokenizer_id,
                           const TokenDatasetOptions& options = {});

  // Views into the mapped cache file, valid while this dataset (or a copy) lives.
  std::span<const int32_t> tokens() const { return tokens_; }  // the whole stream
  std::span<const int32_t> train() const { return tokens_.first(size_t(split_)); }
  std::span<const int32_t> val() const { return tokens_.subspan(size_t(split_)); }

  int64_t num_tokens() const { return int64_t(tokens_.size()); }
  // The number of documents joined (files with at least one byte).
  int64_t num_documents() const { return num_documents_; }
  const std::string& source() const { return source_; }
  const std::string& cache_path() const { return cache_path_; }
  // True when this open() tokenized the sources (no cache, or a stale or corrupt one).
  bool built() const { return built_; }

 private:
  io::MappedFile file_;
  std::span<const int32_t> tokens_;
  int64_t split_ = 0;
  int64_t num_documents_ = 0;
  std::string source_;
  std::string cache_path_;
  bool built_ = false;
};

}  // namespace fitgrad::data
