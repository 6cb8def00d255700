// The tokenizer embedded in a GGUF file (issue 4: a GGUF model loads with its own
// tokenizer): tokenizer.ggml.model "gpt2" (byte-level BPE) with its tokens, merges, token
// types, special ids and pre-tokenizer name, handed to BpeTokenizer::from_vocab.
#pragma once

#include "data/bpe_tokenizer.h"
#include "io/gguf.h"

namespace fitgrad::data {

// Throws fitgrad::Error naming the file when the tokenizer is missing, is not byte-level
// BPE, or its pre-tokenizer is unknown.
BpeTokenizer tokenizer_from_gguf(const io::GgufFile& file);

}  // namespace fitgrad::data
