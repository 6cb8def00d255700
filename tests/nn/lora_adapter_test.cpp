// PEFT's adapter format (nn/lora_adapter.h): a saved adapter has PEFT's adapter_config.json
// keys and values and exactly one lora_A (r, in) and one lora_B (out, r) tensor per LoRA
// layer under "base_model.model.<path>"; it loads into a freshly built model bit for bit
// and gives the same logits; a mismatched rank, a missing or an extra tensor is an error
// naming it that loads nothing.
#include "nn/lora_adapter.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "autograd/grad_mode.h"
#include "io/safetensors.h"
#include "nn/config.h"
#include "nn/decoder.h"
#include "nn/target_modules.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::nn {
namespace {
namespace fs = std::filesystem;

std::unique_ptr<CausalLM> lora_model(const LoraConfig& c, uint64_t seed) {
  auto targets = std::make_shared<TargetModules>(TargetModules::parse("q_proj,v_proj"));
  BuildOptions o{.seed = seed};
  o.linear_factory = targeted_factory(targets, lora_factory(c));
  auto m = build_model(preset("llama-tiny"), o);
  check_targets_found(*targets);
  return m;
}

class LoraAdapter : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("fitgrad_adapter_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(LoraAdapter, SavesPeftsLayoutAndLoadsBitForBit) {
  LoraConfig c;
  c.r = 4;
  c.alpha = 16;
  c.dropout = 0.05;
  const auto model = lora_model(c, 1);
  {
    autograd::NoGradGuard no_grad;
    for (const auto& [name, t] : model->named_parameters())
      if (name.find("lora_B") != std::string::npos) {
        Tensor b = t;
        b.copy_(testing::random_tensor(t.shape(), 3, DType::f32, -0.1, 0.1));
      }
  }
  save_lora_adapter(*model, dir_.string(), {c, "q_proj,v_proj", "HuggingFaceTB/SmolLM2-135M"});

  std::ifstream in(dir_ / "adapter_config.json");
  std::stringstream text;
  text << in.rdbuf();
  const auto j = nlohmann::json::parse(text.str());
  EXPECT_EQ(j.at("peft_type"), "LORA");
  EXPECT_EQ(j.at("task_type"), "CAUSAL_LM");
  EXPECT_EQ(j.at("r"), 4);
  EXPECT_EQ(j.at("lora_alpha"), 16.0);
  EXPECT_EQ(j.at("lora_dropout"), 0.05);
  EXPECT_EQ(j.at("bias"), "none");
  EXPECT_EQ(j.at("use_rslora"), false);
  EXPECT_EQ(j.at("target_modules"), nlohmann::json::array({"q_proj", "v_proj"}));
  EXPECT_EQ(j.at("base_model_name_or_path"), "HuggingFaceTB/SmolLM2-135M");

  const auto file = io::SafetensorsFile::open((dir_ / "adapter_model.safetensors").string());
  const int layers = preset("llama-tiny").num_layers;
  EXPECT_EQ(file.entries().size(), size_t(2 * 2 * layers));  // q and v, A and B, per layer
  const Tensor a = file.tensor("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
  const Tensor b = file.tensor("base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight");
  const ModelConfig cfg = preset("llama-tiny");
  EXPECT_EQ(a.shape(), (Shape{4, cfg.hidden_size}));
  EXPECT_EQ(b.shape()[1], 4);

  const auto fresh = lora_model(c, 2);  // other random A
  load_lora_adapter(*fresh, dir_.string());
  for (const auto& [name, t] : model->named_parameters()) {
    if (name.find(".lora_") == std::string::npos) continue;
    EXPECT_EQ(testing::to_f64(fresh->parameter(name)), testing::to_f64(t)) << name;
  }
  EXPECT_EQ(read_adapter_config(dir_.string()).target_modules, "q_proj,v_proj");
}

TEST_F(LoraAdapter, AMismatchNamesTheCulpritAndLoadsNothing) {
  LoraConfig c;
  c.r = 4;
  c.alpha = 16;
  save_lora_adapter(*lora_model(c, 1), dir_.string(), {c, "q_proj,v_proj", "x"});
  LoraConfig other = c;
  other.r = 8;
  const auto wrong_rank = lora_model(other, 2);
  const auto before =
      testing::to_f64(wrong_rank->parameter("model.layers.0.self_attn.q_proj.lora_A.weight"));
  testing::expect_error([&] { load_lora_adapter(*wrong_rank, dir_.string()); }, "[adapter]",
                        "model.layers.0.self_attn.q_proj has r 8, lora_alpha 16, use_rslora false; "
                        "the adapter r 4");
  EXPECT_EQ(testing::to_f64(wrong_rank->parameter("model.layers.0.self_attn.q_proj.lora_A.weight")),
            before);
  // An adapter for q and v into a model adapting q only: v's tensors are not the model's.
  auto q_only = std::make_shared<TargetModules>(TargetModules::parse("q_proj"));
  BuildOptions o{.seed = 3};
  o.linear_factory = targeted_factory(q_only, lora_factory(c));
  const auto q_model = build_model(preset("llama-tiny"), o);
  testing::expect_error([&] { load_lora_adapter(*q_model, dir_.string()); }, "[adapter]",
                        "'base_model.model.model.layers.0.self_attn.v_proj.lora_A.weight' is not "
                        "a LoRA factor of the model");
}

}  // namespace
}  // namespace fitgrad::nn
