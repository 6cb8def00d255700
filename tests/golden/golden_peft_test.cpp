// fitgrad's LoRA against Hugging Face PEFT (issue 13), on the tiny Llama that
// gen_peft_golden.py saved with transformers and wrapped with PEFT (tests/golden/peft_tiny/):
// the base loads from transformers' config.json and model.safetensors; PEFT's two adapters
// (r 4 on all seven projections; rsLoRA r 8 on q_proj and v_proj), with random lora_B,
// load through nn::load_lora_adapter; the logits of the base, of each adapted model and of
// each merged model equal PEFT's within f32 rounding (Note [Golden block tolerances]); and
// the adapter fitgrad saves back holds PEFT's keys, shapes and values exactly. With
// FITGRAD_PEFT_CHECK_OUT set, the saved adapter and fitgrad's logits are left there for
// gen_peft_golden.py --check, which loads them into PEFT (the other direction).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "autograd/grad_mode.h"
#include "io/safetensors.h"
#include "nn/lora.h"
#include "nn/lora_adapter.h"
#include "nn/target_modules.h"
#include "tests/golden/golden_compare.h"
#include "train/model_source.h"

namespace fitgrad {
namespace {

namespace fs = std::filesystem;
using testing::golden_path;
using testing::GoldenFile;

const GoldenFile& golden() {
  static const GoldenFile f(golden_path("peft_tiny/peft_logits.gtb"));
  return f;
}

std::string dir(const std::string& name) { return golden_path("peft_tiny/" + name); }

// The base, with the adapter in `adapter` (empty: none) over it.
std::unique_ptr<nn::CausalLM> load(const std::string& adapter) {
  nn::BuildOptions o;
  std::shared_ptr<nn::TargetModules> targets;
  if (!adapter.empty()) {
    const nn::AdapterConfig c = nn::read_adapter_config(adapter);
    targets = std::make_shared<nn::TargetModules>(nn::TargetModules::parse(c.target_modules));
    o.linear_factory = nn::targeted_factory(targets, nn::lora_factory(c.lora));
  }
  std::unique_ptr<nn::CausalLM> model = train::load_model(dir("base"), "", o).model;
  if (targets) {
    nn::check_targets_found(*targets);
    nn::load_lora_adapter(*model, adapter);
  }
  return model;
}

Tensor logits(const nn::CausalLM& model) {
  autograd::NoGradGuard no_grad;
  return model.forward(golden().tensor("input_ids"));
}

void merge_all(nn::CausalLM& model) {
  for (const auto& [path, m] : model.named_modules())
    if (const auto* l = dynamic_cast<const nn::LoraLinear*>(m))
      const_cast<nn::LoraLinear*>(l)->merge();
}

TEST(GoldenPeft, TheBaseLoadsFromTransformersFiles) {
  testing::expect_matches_golden(golden(), "base logits", logits(*load("")), "base_logits");
}

TEST(GoldenPeft, AdaptedLogitsArePefts) {
  for (const auto& [name, stored] : {std::pair{"adapter", "lora"}, {"adapter_rslora", "rslora"}}) {
    const auto model = load(dir(name));
    testing::expect_matches_golden(golden(), name, logits(*model), std::string(stored) + "_logits");
    merge_all(*model);
    testing::expect_matches_golden(golden(), std::string(name) + " merged", logits(*model),
                                   std::string(stored) + "_merged_logits");
  }
}

TEST(GoldenPeft, TheSavedAdapterIsPeftsFile) {
  const std::string src = dir("adapter");
  const auto model = load(src);
  const char* keep = std::getenv("FITGRAD_PEFT_CHECK_OUT");
  const fs::path out =
      keep ? fs::path(keep)
           : fs::temp_directory_path() / ("fitgrad_peft_saved_" + std::to_string(::getpid()));
  nn::save_lora_adapter(*model, out.string(), nn::read_adapter_config(src));
  const auto theirs = io::SafetensorsFile::open(src + "/adapter_model.safetensors").tensors();
  const auto ours =
      io::SafetensorsFile::open((out / "adapter_model.safetensors").string()).tensors();
  ASSERT_EQ(ours.size(), theirs.size());
  for (const auto& [key, t] : theirs) {
    ASSERT_TRUE(ours.count(key)) << key;
    EXPECT_EQ(ours.at(key).shape(), t.shape()) << key;
    EXPECT_EQ(testing::to_f64(ours.at(key)), testing::to_f64(t)) << key;
  }
  auto read_json = [](const fs::path& p) { return nlohmann::json::parse(std::ifstream(p)); };
  const nlohmann::json a = read_json(out / "adapter_config.json");
  const nlohmann::json b = read_json(fs::path(src) / "adapter_config.json");
  for (const char* k :
       {"r", "lora_alpha", "lora_dropout", "bias", "task_type", "peft_type", "use_rslora"})
    EXPECT_EQ(a.at(k), b.at(k)) << k;
  EXPECT_EQ(a.at("target_modules").get<std::set<std::string>>(),
            b.at("target_modules").get<std::set<std::string>>());
  if (keep)  // logits for gen_peft_golden.py --check OUT OUT/logits.safetensors
    io::save_safetensors((out / "logits.safetensors").string(),
                         {{"input_ids", golden().tensor("input_ids")}, {"logits", logits(*model)}});
  else
    fs::remove_all(out);
}

}  // namespace
}  // namespace fitgrad
