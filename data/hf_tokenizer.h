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

// The other way: a tokenizer.json (as `tokenizers` writes it) for a vocabulary JSON of Note
// [Self-contained GGUF vocabularies] (a GGUF file's, or one this module read), which
// hf_tokenizer_vocabulary reads back to the same tokens, merges, token types, pre-tokenizer
// and ignore_merges. The roles go to tokenizer_config.json (hf_tokenizer_config).
nlohmann::json hf_tokenizer_json(const nlohmann::json& vocabulary);
// tokenizer_config.json for the vocabulary's roles: bos_token, eos_token, pad_token (those it
// has), its "chat_template" when it carries one, and the tokenizer class transformers loads a
// tokenizer.json with.
nlohmann::json hf_tokenizer_config(const nlohmann::json& vocabulary);

// Whether the tokenizer of a vocabulary JSON starts a text with its bos, as transformers'
// tokenizer(text) does: SentencePiece-style vocabularies (Llama 2, Mistral, Gemma) and Llama
// 3's byte-level one, when they have a bos role (llama.cpp's add_bos_token default likewise).
bool vocabulary_adds_bos(const nlohmann::json& vocabulary);

}  // namespace fitgrad::data
