// LoRA adapters in PEFT's saved format, so that PEFT and Hugging Face tools load fitgrad's
// adapters and fitgrad loads theirs: a folder with
//   adapter_config.json         r, lora_alpha, lora_dropout, target_modules, bias "none",
//                               task_type "CAUSAL_LM", peft_type "LORA",
//                               base_model_name_or_path, use_rslora (and PEFT's other keys
//                               at their defaults)
//   adapter_model.safetensors   "base_model.model.<layer path>.lora_A.weight" (r, in) and
//                               "...lora_B.weight" (out, r) for every LoRA layer
// (Note [LoRA names] in nn/lora.h). Loading checks the config against the model's LoRA
// layers and every tensor's name and shape, names each culprit and changes nothing when
// anything is wrong.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "nn/lora.h"

namespace fitgrad::nn {

struct AdapterConfig {
  LoraConfig lora;
  std::string target_modules;  // TargetModules::describe(): "all-linear", a pattern, "a,b"
  std::string base_model_name_or_path;
};

// Writes the adapter of every LoraLinear in `model` into `dir` (created if needed); each
// file is replaced atomically.
void save_lora_adapter(const Module& model, const std::string& dir, const AdapterConfig& config);
// Reads dir/adapter_config.json.
AdapterConfig read_adapter_config(const std::string& dir);
// Copies the adapter in `dir` into the LoRA layers of `model`, which must have been built
// with the adapter's r, lora_alpha and use_rslora.
void load_lora_adapter(const Module& model, const std::string& dir);

// The factors of `tensors` (an adapter_model.safetensors) whose rank, lora_A's rows or lora_B's
// columns, is not adapter_config.json's r, each named with both ranks: PEFT builds the layers
// with r and refuses such factors, and a merge scaled by lora_alpha / r would be wrong. Every
// reader of an adapter checks it (load_lora_adapter, export --merge).
std::vector<std::string> rank_problems(const AdapterConfig& config,
                                       const std::map<std::string, Tensor>& tensors);

// "base_model.model." + path + ".lora_A.weight" (or lora_B).
std::string peft_key(const std::string& layer_path, const char* factor);

}  // namespace fitgrad::nn
