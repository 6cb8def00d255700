// The tiny Llama of tests/golden/peft_tiny with its PEFT adapter loaded and only the LoRA
// factors trainable: the model of the golden tests that compare training steps with
// transformers + PEFT (golden_preference_test.cpp, golden_grpo_model_test.cpp).
#pragma once

#include <memory>

#include "nn/lora.h"
#include "nn/lora_adapter.h"
#include "nn/target_modules.h"
#include "tests/golden/golden_file.h"
#include "train/model_source.h"

namespace fitgrad::testing {

inline std::unique_ptr<nn::CausalLM> peft_tiny_adapted_model() {
  const std::string adapter = golden_path("peft_tiny/adapter");
  const nn::AdapterConfig c = nn::read_adapter_config(adapter);
  const auto targets =
      std::make_shared<nn::TargetModules>(nn::TargetModules::parse(c.target_modules));
  nn::BuildOptions o;
  o.linear_factory = nn::targeted_factory(targets, nn::lora_factory(c.lora));
  std::unique_ptr<nn::CausalLM> model =
      train::load_model(golden_path("peft_tiny/base"), "", o).model;
  nn::load_lora_adapter(*model, adapter);
  nn::mark_only_lora_as_trainable(*model);
  return model;
}

}  // namespace fitgrad::testing
