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

#include <string>

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

// "base_model.model." + path + ".lora_A.weight" (or lora_B).
std::string peft_key(const std::string& layer_path, const char* factor);

}  // namespace fitgrad::nn
