// `fitgrad export --base MODEL -o DIR [--merge ADAPTER_DIR] [--dtype bf16|f16|f32]
// [--max_shard_size 5GB] [--overwrite]`: a Hugging Face model folder (Note [Model folders
// written] in export.cpp) that transformers, vLLM and fitgrad load; with -o OUT.gguf, a GGUF
// file that llama.cpp, Ollama and fitgrad load (Note [GGUF files written] in export_gguf.cpp);
// or, with -o OUT.safetensors and --merge, one safetensors file.
// --merge: a LoRA adapter in PEFT's format (nn/lora_adapter.h) merged into its base model's
// weights, under Hugging Face names that transformers (and fitgrad's --init) load as a plain
// model. Each adapted weight becomes W + scaling * B A, computed in
// f32 and rounded once to the output dtype (16-bit by default, as merged models are
// published); every other floating tensor is converted to the output dtype. MODEL is a
// .safetensors or Llama .gguf file, or a checkpoint directory or model folder (its
// model.safetensors or shards). The
// adapter is validated before anything is read (Note [Adapters export merges]); the output
// follows Note [Output policy] (apps/output_policy.h): never an input, never in a run's
// directory or a checkpoint, an existing file replaced only with --overwrite.
#pragma once

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>

namespace fitgrad::apps {

struct ExportArgs {
  std::string merge, base, out;
  std::string dtype = "bf16";          // bf16, f16, f32, and q8_0 for a .gguf
  std::string max_shard_size = "5GB";  // a model folder's shards (Note [Model folders written])
  bool overwrite = false;
  bool skip_verification = false;  // Note [Verified reads] in train/checkpoint_dir.h
};

// Runs the command; returns the number of weights merged. Throws "[export] ..." on bad
// input: an adapter tensor without its pair or its base weight, shapes that do not fit, an
// adapter config export cannot merge faithfully, an output the policy refuses.
int64_t export_merged(const ExportArgs& args, std::ostream& out);

// Registers the `export` subcommand bound to `args`, and returns it.
CLI::App* add_export_command(CLI::App& app, ExportArgs& args);

}  // namespace fitgrad::apps
