// What the golden tests that compare training steps with transformers + PEFT share
// (golden_preference_test.cpp, golden_grpo_model_test.cpp): the tiny Llama of
// tests/golden/peft_tiny with its PEFT adapter loaded and only the LoRA factors trainable, and
// an optimizer that records the gradients a train::TrainStep hands it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nn/lora.h"
#include "nn/lora_adapter.h"
#include "nn/target_modules.h"
#include "optim/optimizer.h"
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

// An optimizer that keeps each gradient it is given and changes nothing.
class Recorder final : public optim::Optimizer {
 public:
  explicit Recorder(std::vector<optim::ParamGroup> groups)
      : Optimizer(std::move(groups), 0.0, "recorder", [](const std::string&, const Tensor&) {
          return std::vector<optim::StateSpec>{};
        }) {}
  std::string name() const override { return "recorder"; }
  std::map<std::string, Tensor> grads;

 protected:
  void update(size_t, const optim::ParamGroup&, const std::string& name, const Tensor&,
              const Tensor& grad) override {
    grads[name] = grad.clone();
  }
};

}  // namespace fitgrad::testing
