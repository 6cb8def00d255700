// Hugging Face's tokenizer.json (the `tokenizers` library's file, which every Hub model
// folder carries), read for the byte-level BPE tokenizers of GPT-2, Llama 3, SmolLM and
// their kin into the vocabulary JSON of Note [Self-contained GGUF vocabularies]
// (data/gguf_tokenizer.h), so it builds the same BpeTokenizer and a checkpoint stores it the
// same way. See Note [tokenizer.json components] in hf_tokenizer.cpp for what is read and
// what is refused.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace fitgrad::data {

// The vocabulary JSON of the tokenizer.json at `path`; `config`, when not null, is the
// folder's tokenizer_config.json, whose bos_token and eos_token name the roles. Throws
// fitgrad::Error starting "[tokenizer <path>]" naming the component or token at fault.
nlohmann::json hf_tokenizer_vocabulary(const std::string& path,
                                       const nlohmann::json& config = nullptr);

}  // namespace fitgrad::data
