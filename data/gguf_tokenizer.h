// The tokenizer embedded in a GGUF file (issue 4: a GGUF model loads with its own
// tokenizer): tokenizer.ggml.model "gpt2" (byte-level BPE, BpeTokenizer) with its tokens,
// merges, token types, special ids and pre-tokenizer name, or "llama" (SentencePiece,
// SpmTokenizer) with its tokens, scores and token types.
//
// Note [Self-contained GGUF vocabularies]
// The same keys also exist as one JSON object, {"pre", "tokens", "merges", "token_types",
// "bos", "eos", "pad"} (absent ids are null; a tokenizer.json's also carries "name",
// "ignore_merges", "normalizer" and "added_rules", data/hf_tokenizer.h), which a checkpoint
// stores in its fitgrad_tokenizer.json: a checkpoint of a model loaded from GGUF then
// decodes, generates and resumes without the .gguf file, wherever that file has gone. A
// SentencePiece vocabulary has "model": "spm", its merges (for a GGUF file, the ones its
// scores imply), "unk", and "spm": the pipeline of SpmOptions (spm_options_json). Either
// carries the file's chat template, tokenizer.chat_template, as "chat_template".
#pragma once

#include <memory>
#include <nlohmann/json.hpp>

#include "data/spm_tokenizer.h"
#include "data/tokenizer.h"
#include "io/gguf.h"

namespace fitgrad::data {

// The tokenizer keys of `file` as JSON (Note [Self-contained GGUF vocabularies]). Throws
// fitgrad::Error naming the file when the tokenizer is missing or of another model.
nlohmann::json gguf_vocabulary(const io::GgufFile& file);
// The tokenizer that JSON describes; `where` starts errors ("[tokenizer x.json]").
std::unique_ptr<Tokenizer> tokenizer_from_vocabulary(const nlohmann::json& vocab,
                                                     const std::string& where);
// Both at once. Throws fitgrad::Error naming the file when the tokenizer is missing, is not
// one fitgrad reads, or its pre-tokenizer is unknown.
std::unique_ptr<Tokenizer> tokenizer_from_gguf(const io::GgufFile& file);

// A SentencePiece pipeline's "spm" object and back, with the added tokens' rules.
nlohmann::json spm_options_json(const SpmOptions& options);
SpmOptions spm_options_from_json(const nlohmann::json& vocab);

}  // namespace fitgrad::data
