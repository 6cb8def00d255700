// Hand-written matchers for the pre-tokenization regexes of byte-level BPE. A regex
// engine would work too; these are a few dozen lines each, need no library, and run at
// memory speed.
//
// Note [Pre-tokenizer patterns]
// GPT-2 (r50k_base), as published with its encoder:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// Llama 3 (the same as cl100k_base), from Meta's tokenizer:
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
//   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Qwen2: Llama 3's with \p{N} instead of \p{N}{1,3}.
// SmolLM (GGUF tokenizer.ggml.pre "smollm"; also StarCoder, Refact, Command-R, CodeShell):
// Hugging Face's Sequence[Digits(individual_digits), ByteLevel] — every \p{N} character is
// its own piece, and GPT-2's pattern runs on each stretch between them.
//
// A regex tries its alternatives in order at each position and takes the first that
// matches, so each matcher below tests them in the same order. The only backtracking is
// \s+(?!\S): a white-space run followed by a non-space gives up its last character, which
// then starts the next piece (e.g. " world" with its space). \s is Unicode White_Space,
// \p{L} and \p{N} are the general categories (data/utf8.h).
//
// Note [Invalid UTF-8]
// The patterns are defined on code points. A byte that is not part of well-formed UTF-8
// counts as one character of class "other" (neither letter, number nor space), so such
// bytes join punctuation runs. Every byte lands in exactly one piece, and byte-level BPE
// round-trips any input.
#include "data/pretokenizer.h"

#include "tensor/error.h"

namespace fitgrad::data {
namespace {

struct Char {
  char32_t cp;
  uint32_t length;
  CharClass cls;
};

inline Char char_at(std::string_view text, size_t pos) {
  const Utf8Char c = decode_utf8(text, pos);
  return {c.cp, c.length, char_class(c.cp)};
}

// The end of the run of characters of class cls that starts at pos.
inline size_t run_end(std::string_view text, size_t pos, CharClass cls) {
  while (pos < text.size()) {
    const Char c = char_at(text, pos);
    if (c.cls != cls) break;
    pos += c.length;
  }
  return pos;
}

// \s+(?!\S)|\s+ at pos, where text[pos] starts a white-space character.
inline size_t space_piece_end(std::string_view text, size_t pos) {
  size_t last = pos;  // the start of the run's last character
  size_t end = pos;
  while (end < text.size()) {
    const Char c = char_at(text, end);
    if (c.cls != CharClass::space) break;
    last = end;
    end += c.length;
  }
  if (end == text.size()) return end;  // (?!\S) holds at the end of the text
  return last > pos ? last : end;      // give the last space to the next piece
}

inline char lower(char c) { return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c; }

// 's|'t|'re|'ve|'m|'ll|'d at pos: the match length, or 0.
inline size_t contraction_length(std::string_view text, size_t pos, bool ignore_case) {
  if (text[pos] != '\'' || pos + 1 >= text.size()) return 0;
  const char a = ignore_case ? lower(text[pos + 1]) : text[pos + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (pos + 2 >= text.size()) return 0;
  const char b = ignore_case ? lower(text[pos + 2]) : text[pos + 2];
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

}  // namespace

namespace detail {

size_t gpt2_piece_end(std::string_view text, size_t pos) {
  if (const size_t len = contraction_length(text, pos, false)) return pos + len;
  // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+'
  const size_t start = text[pos] == ' ' ? pos + 1 : pos;
  if (start < text.size()) {
    const Char c = char_at(text, start);
    if (c.cls != CharClass::space) return run_end(text, start + c.length, c.cls);
  }
  return space_piece_end(text, pos);
}

size_t llama3_piece_end(std::string_view text, size_t pos, int max_digits) {
  if (const size_t len = contraction_length(text, pos, true)) return pos + len;
  const Char c = char_at(text, pos);
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (c.cls == CharClass::letter) return run_end(text, pos + c.length, CharClass::letter);
  if (c.cls != CharClass::number && c.cp != '\r' && c.cp != '\n' && pos + c.length < text.size() &&
      char_at(text, pos + c.length).cls == CharClass::letter)
    return run_end(text, pos + c.length, CharClass::letter);
  // \p{N}{1,max_digits}
  if (c.cls == CharClass::number) {
    size_t end = pos + c.length;
    for (int i = 1; i < max_digits && end < text.size(); ++i) {
      const Char d = char_at(text, end);
      if (d.cls != CharClass::number) break;
      end += d.length;
    }
    return end;
  }
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  const size_t start = text[pos] == ' ' ? pos + 1 : pos;
  if (start < text.size()) {
    const Char d = char_at(text, start);
    if (d.cls == CharClass::other) {
      size_t end = run_end(text, start + d.length, CharClass::other);
      while (end < text.size() && (text[end] == '\r' || text[end] == '\n')) ++end;
      return end;
    }
  }
  // \s*[\r\n]+: up to the run's last line break, when it has one.
  size_t end = pos;
  size_t after_break = 0;
  while (end < text.size()) {
    const Char d = char_at(text, end);
    if (d.cls != CharClass::space) break;
    end += d.length;
    if (d.cp == '\r' || d.cp == '\n') after_break = end;
  }
  if (after_break != 0) return after_break;
  return space_piece_end(text, pos);
}

}  // namespace detail

std::string_view pre_tokenizer_name(PreTokenizer pre) {
  switch (pre) {
    case PreTokenizer::gpt2: return "gpt2";
    case PreTokenizer::llama3: return "llama3";
    case PreTokenizer::qwen2: return "qwen2";
    case PreTokenizer::smollm: return "smollm";
    case PreTokenizer::none: return "none";
  }
  return "?";
}

PreTokenizer pre_tokenizer_from_gguf(std::string_view gguf_pre) {
  // The names llama.cpp's converter writes for models with these patterns.
  for (std::string_view name : {"", "gpt2", "gpt-2", "mpt", "olmo", "jais"})
    if (gguf_pre == name) return PreTokenizer::gpt2;
  for (std::string_view name : {"llama3", "llama-v3", "llama-bpe", "dbrx", "smaug-bpe"})
    if (gguf_pre == name) return PreTokenizer::llama3;
  for (std::string_view name : {"qwen2", "stablelm2"})
    if (gguf_pre == name) return PreTokenizer::qwen2;
  for (std::string_view name : {"smollm", "starcoder", "refact", "command-r", "codeshell"})
    if (gguf_pre == name) return PreTokenizer::smollm;
  throw Error(fmt::format(
      "[tokenizer] unknown pre-tokenizer '{}' (tokenizer.ggml.pre); known: gpt2, mpt, olmo, "
      "jais, llama-bpe, dbrx, smaug-bpe, qwen2, stablelm2, smollm, starcoder, refact, "
      "command-r, codeshell",
      gguf_pre));
}

std::vector<std::string_view> pre_tokenize(PreTokenizer pre, std::string_view text) {
  std::vector<std::string_view> pieces;
  pre_tokenize(pre, text, [&](std::string_view piece) { pieces.push_back(piece); });
  return pieces;
}

}  // namespace fitgrad::data
