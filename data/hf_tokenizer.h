// Hugging Face's tokenizer.json (the `tokenizers` library's file, which every Hub model
// folder carries), read for the byte-level BPE tokenizers of GPT-2, Llama 3, SmolLM and
// their kin into the vocabulary JSON of Note [Self-contained GGUF vocabularies]
// (data/gguf_tokenizer.h), so it builds the same BpeTokenizer and a checkpoint stores it the
// same way. See Note [tokenizer.json components] in hf_tokenizer.cpp for what is read and
// what is refused.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"

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
// tokenizer(text) does: its "add_bos" (the post-processor's template; GGUF's
// tokenizer.ggml.add_bos_token), else for SentencePiece-style vocabularies and Llama 3's
// byte-level one, when they have a bos role (Note [The bos a text starts with] in
// hf_tokenizer.cpp).
bool vocabulary_adds_bos(const nlohmann::json& vocabulary);

// The ids of `text` as transformers' tokenizer(text) gives them: the bos of `tok` first when
// its vocabulary JSON `vocabulary` says it starts every text with it (vocabulary_adds_bos),
// then the text's tokens, special tokens' texts recognized when `allow_special`. For a prompt
// (generate --prompt, --eval_prompts) and a scored text (eval).
std::vector<int32_t> text_ids(const Tokenizer& tok, const nlohmann::json& vocabulary,
                              std::string_view text, bool allow_special);

}  // namespace fitgrad::data
