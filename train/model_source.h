// Where `fitgrad generate` (and `train --model/--init`) get a model and its tokenizer:
// a spec names a preset, a config.json, a checkpoint directory or a GGUF file, and an
// optional init file supplies weights for the model the spec describes.
//
// Note [Model specs]
//   - a preset name (nn::preset_names()): the preset, randomly initialised from
//     options.seed; tokenizer by vocabulary size (default_tokenizer);
//   - a path ending in .json: a Hugging Face config.json, randomly initialised;
//     tokenizer by vocabulary size;
//   - a directory: a fitgrad checkpoint or a Hugging Face model folder, config.json +
//     model.safetensors or the shards of model.safetensors.index.json (Hugging Face names)
//     + fitgrad_tokenizer.json (the tokenizer spec below) or a Hugging Face tokenizer.json
//     with its tokenizer_config.json (data/hf_tokenizer.h); without either, by vocabulary
//     size;
//   - a path ending in .gguf: the model (nn/gguf_model.h) with its embedded tokenizer.
// init, when not empty, is a .safetensors or .gguf file whose tensors replace the spec's
// weights: names (Hugging Face's; GGUF names are translated) and shapes must match the
// model exactly (Module::load, strict). A spec without a stored tokenizer then takes the
// init GGUF's tokenizer.
//
// Note [Tokenizer ids]
// A tokenizer is named by a string, kept in a checkpoint's fitgrad_tokenizer.json so a
// checkpoint decodes with the tokenizer it was trained with: "byte" (data::ByteTokenizer),
// "gpt2" (GPT-2's BPE from the project's assets), "gguf:<absolute path>" (the BPE
// embedded in that GGUF file) or "hf:<absolute path>" (a Hugging Face tokenizer.json). The
// file holds {"kind": "byte" | "gpt2" | "gguf" | "hf"} plus, for gguf and hf, "path":
// "<absolute path>" and "vocabulary": the tokenizer itself, so that the checkpoint needs
// the source file no more (Note [Self-contained GGUF vocabularies]). It is not named tokenizer.json, which is Hugging
// Face's full tokenizer file, so a checkpoint directory never misleads `transformers`.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "nn/config.h"
#include "nn/decoder.h"
#include "nn/tensor_source.h"

namespace fitgrad::train {

// Note [No tokenizer on meta]
// A dry run on meta reads no text, so a preset or config.json whose vocabulary has no
// default tokenizer (llama2-7b's 32000) still loads there: tokenizer is null and
// tokenizer_id "none". Everywhere else such a model is an error that asks for a tokenizer.
struct LoadedModel {
  std::unique_ptr<nn::CausalLM> model;
  std::unique_ptr<data::Tokenizer> tokenizer;
  std::string tokenizer_id;  // Note [Tokenizer ids]
  // A GGUF tokenizer's vocabulary (Note [Self-contained GGUF vocabularies] in
  // data/gguf_tokenizer.h), which checkpoints store; null for byte and gpt2.
  nlohmann::json tokenizer_vocabulary;
  std::string description;  // one line: where the model and its weights came from
  // Note [Stop tokens]: the ids generation ends at; empty when the spec names none (the
  // tokenizer's eos then does).
  std::vector<int32_t> stop_ids;
};

// What a model spec may be, for the --model flags' help (Note [Model specs]).
inline constexpr const char* kModelSpecHelp =
    "a preset name, a Hugging Face config.json or model folder (sharded or not), a checkpoint "
    "directory, or a .gguf file";
// What --init may be.
inline constexpr const char* kInitHelp = "weights to load: a .safetensors or .gguf file";

// Note [Model specs]. Errors are fitgrad::Errors starting "[model <spec>]" (or the
// reader's own prefix for a malformed file). A checkpoint directory is verified against its
// manifest first unless `skip_verification` or on meta (Note [Verified reads] in
// train/checkpoint_dir.h); `what` names the command and option in that error.
LoadedModel load_model(const std::string& spec, const std::string& init,
                       const nn::BuildOptions& options, bool skip_verification = false,
                       const std::string& what = "--model");

// The tokenizer of a model without a stored one: vocabulary 256 -> "byte", 50257 ->
// "gpt2"; any other size is an error naming it. Sets *tokenizer_id when not null.
// The tensors of a weights file under Hugging Face names, read one at a time (Note
// [Streaming loads] in nn/tensor_source.h): a .safetensors file (its bitsandbytes 4-bit
// weights dequantized to their original dtype) or a Llama .gguf (in `dtype`); `flag`
// names the option in errors ("--init", "--base").
nn::TensorSource read_weights_file(const std::string& path, DType dtype, const std::string& flag);

// The weights of a model folder under Hugging Face names: model.safetensors, or the shards
// model.safetensors.index.json names (Note [Sharded model folders] in model_source.cpp);
// *file, when not null, is set to the file read (the single file or the index).
nn::TensorSource folder_weights(const std::string& dir, std::string* file = nullptr);

std::unique_ptr<data::Tokenizer> default_tokenizer(const nn::ModelConfig& cfg,
                                                   std::string* tokenizer_id);

// The tokenizer a tokenizer id names (Note [Tokenizer ids]).
std::unique_ptr<data::Tokenizer> make_tokenizer(const std::string& tokenizer_id);

// What fitgrad_tokenizer.json holds: the id and, for a GGUF tokenizer, its vocabulary.
struct TokenizerSpec {
  std::string id;
  nlohmann::json vocabulary;  // null when the spec has none (byte, gpt2, older checkpoints)
  // The tokenizer: from the stored vocabulary when there is one, else make_tokenizer(id).
  std::unique_ptr<data::Tokenizer> make() const;
};

// Writes dir/fitgrad_tokenizer.json for `tokenizer_id` (with `vocabulary` when not null),
// and reads it back.
void save_tokenizer_spec(const std::string& dir, const std::string& tokenizer_id,
                         const nlohmann::json& vocabulary = nullptr);
TokenizerSpec load_tokenizer_spec(const std::string& dir);

}  // namespace fitgrad::train
