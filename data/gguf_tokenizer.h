// The tokenizer embedded in a GGUF file (issue 4: a GGUF model loads with its own
// tokenizer): tokenizer.ggml.model "gpt2" (byte-level BPE) with its tokens, merges, token
// types, special ids and pre-tokenizer name, handed to BpeTokenizer::from_vocab.
//
// Note [Self-contained GGUF vocabularies]
// The same keys also exist as one JSON object, {"pre", "tokens", "merges", "token_types",
// "bos", "eos", "pad"} (absent ids are null; a tokenizer.json's also carries "name",
// "ignore_merges" and "normalizer", data/hf_tokenizer.h), which a checkpoint stores in its
// fitgrad_tokenizer.json: a checkpoint of a model loaded from GGUF then decodes, generates
// and resumes without the .gguf file, wherever that file has gone.
#pragma once

#include <nlohmann/json.hpp>

#include "data/bpe_tokenizer.h"
#include "io/gguf.h"

namespace fitgrad::data {

// The tokenizer keys of `file` as JSON (Note [Self-contained GGUF vocabularies]). Throws
// fitgrad::Error naming the file when the tokenizer is missing or is not byte-level BPE.
nlohmann::json gguf_vocabulary(const io::GgufFile& file);
// The tokenizer that JSON describes; `where` starts errors ("[tokenizer x.json]").
BpeTokenizer tokenizer_from_vocabulary(const nlohmann::json& vocab, const std::string& where);
// Both at once. Throws fitgrad::Error naming the file when the tokenizer is missing, is not
// byte-level BPE, or its pre-tokenizer is unknown.
BpeTokenizer tokenizer_from_gguf(const io::GgufFile& file);

}  // namespace fitgrad::data
