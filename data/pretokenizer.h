// Pre-tokenizers of byte-level BPE: they split text into pieces ("words") that BPE then
// merges independently. Each is a hand-written matcher equivalent to a regex (Note
// [Pre-tokenizer patterns] in data/pretokenizer.cpp); the pieces always tile the input,
// so concatenating them gives the text back, whatever its bytes.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "data/utf8.h"

namespace fitgrad::data {

enum class PreTokenizer {
  gpt2,    // GPT-2 / r50k_base
  llama3,  // Llama 3 / cl100k_base: case-free contractions, digits in groups of <= 3
  qwen2,   // Llama 3's pattern with each digit alone (Qwen2, GGUF "qwen2")
  smollm,  // each \p{N} alone, then the GPT-2 pattern (SmolLM/StarCoder, GGUF "smollm")
  none,    // the whole text is one piece
};

std::string_view pre_tokenizer_name(PreTokenizer pre);

// The pre-tokenizer of a GGUF file's tokenizer.ggml.pre value ("gpt2", "llama-bpe",
// "smollm", ...); an empty name means GPT-2's pattern. Throws fitgrad::Error naming an
// unknown value.
PreTokenizer pre_tokenizer_from_gguf(std::string_view gguf_pre);

namespace detail {
// The end of the piece that starts at text[pos] (pos < text.size()).
size_t gpt2_piece_end(std::string_view text, size_t pos);
// max_digits: 3 for Llama 3, 1 for Qwen2.
size_t llama3_piece_end(std::string_view text, size_t pos, int max_digits);
}  // namespace detail

// Calls visit(std::string_view piece) for each piece of text, in order.
template <class Visit>
void pre_tokenize(PreTokenizer pre, std::string_view text, Visit&& visit) {
  const size_t n = text.size();
  size_t pos = 0;
  switch (pre) {
    case PreTokenizer::gpt2:
      while (pos < n) {
        const size_t end = detail::gpt2_piece_end(text, pos);
        visit(text.substr(pos, end - pos));
        pos = end;
      }
      return;
    case PreTokenizer::llama3:
    case PreTokenizer::qwen2:
      while (pos < n) {
        const size_t end = detail::llama3_piece_end(text, pos, pre == PreTokenizer::llama3 ? 3 : 1);
        visit(text.substr(pos, end - pos));
        pos = end;
      }
      return;
    case PreTokenizer::smollm:
      while (pos < n) {
        const Utf8Char c = decode_utf8(text, pos);
        if (char_class(c.cp) == CharClass::number) {
          visit(text.substr(pos, c.length));
          pos += c.length;
          continue;
        }
        // The GPT-2 pattern runs on the stretch up to the next number, as on its own text.
        size_t stop = pos + c.length;
        while (stop < n) {
          const Utf8Char d = decode_utf8(text, stop);
          if (char_class(d.cp) == CharClass::number) break;
          stop += d.length;
        }
        const std::string_view segment = text.substr(0, stop);
        while (pos < stop) {
          const size_t end = detail::gpt2_piece_end(segment, pos);
          visit(text.substr(pos, end - pos));
          pos = end;
        }
      }
      return;
    case PreTokenizer::none:
      if (n > 0) visit(text);
      return;
  }
}

// The pieces as views into text.
std::vector<std::string_view> pre_tokenize(PreTokenizer pre, std::string_view text);

}  // namespace fitgrad::data
