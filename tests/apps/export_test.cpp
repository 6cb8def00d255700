// `fitgrad export --merge` (apps/export.h): a PEFT adapter saved by fitgrad, merged into the
// base weights it was trained on, gives a plain model whose logits are the LoRA model's (to
// f32 rounding with --dtype f32; bf16 by default, with every floating tensor in bf16); an
// adapter whose layer the base lacks is an error naming it.
#include "apps/export.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "autograd/grad_mode.h"
#include "io/safetensors.h"
#include "nn/config.h"
#include "nn/decoder.h"
#include "nn/lora_adapter.h"
#include "nn/target_modules.h"
#include "tests/golden/golden_file.h"
#include "tests/tensor/ops/op_harness.h"
#include "train/model_source.h"

namespace fitgrad::apps {

using train::load_model;
using train::LoadedModel;
namespace {
namespace fs = std::filesystem;

class Export : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("fitgrad_export_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // A plain model (the base) and a LoRA model over the same base weights.
    base_ = nn::build_model(nn::preset("llama-tiny"), {.seed = 21});
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const auto& [name, t] : base_->named_parameters()) tensors.emplace_back(name, t);
    io::save_safetensors((dir_ / "base.safetensors").string(), tensors);
    auto targets =
        std::make_shared<nn::TargetModules>(nn::TargetModules::parse("q_proj,down_proj"));
    lora_config_.r = 4;
    lora_config_.alpha = 12;
    nn::BuildOptions o{.seed = 22};
    o.linear_factory = nn::targeted_factory(targets, nn::lora_factory(lora_config_));
    lora_ = nn::build_model(nn::preset("llama-tiny"), o);
    autograd::NoGradGuard no_grad;
    for (const auto& [name, t] : lora_->named_parameters()) {
      Tensor p = t;
      if (name.find(".lora_B") != std::string::npos)
        p.copy_(testing::random_tensor(t.shape(), 23, DType::f32, -0.2, 0.2));
      else if (name.find(".lora_A") == std::string::npos) {
        std::string plain = name;
        const auto at = plain.find(".base_layer");
        if (at != std::string::npos) plain.erase(at, std::string(".base_layer").size());
        p.copy_(base_->parameter(plain));
      }
    }
    nn::save_lora_adapter(*lora_, (dir_ / "adapter").string(),
                          {lora_config_, "q_proj,down_proj", "base"});
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::unique_ptr<nn::CausalLM> base_, lora_;
  nn::LoraConfig lora_config_;
};

TEST_F(Export, TheMergedModelGivesTheLoraModelsLogits) {
  ExportArgs a;
  a.merge = (dir_ / "adapter").string();
  a.base = (dir_ / "base.safetensors").string();
  a.out = (dir_ / "merged.safetensors").string();
  a.dtype = "f32";
  std::ostringstream out;
  EXPECT_EQ(export_merged(a, out), 4);  // q_proj and down_proj in 2 layers
  LoadedModel merged = load_model("llama-tiny", a.out, {});
  std::vector<int64_t> v(2 * 8);
  for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t((i * 41 + 7) % 256);
  const Tensor ids = Tensor::from_vector(v, {2, 8}, DType::i64);
  autograd::NoGradGuard no_grad;
  EXPECT_TRUE(testing::all_close(testing::to_f64(merged.model->forward(ids)),
                                 testing::to_f64(lora_->forward(ids)), 1e-4, 1e-5));
  EXPECT_FALSE(testing::all_close(testing::to_f64(merged.model->forward(ids)),
                                  testing::to_f64(base_->forward(ids)), 1e-4, 1e-5));

  a.dtype = "bf16";
  a.out = (dir_ / "merged_bf16.safetensors").string();
  export_merged(a, out);
  const auto file = io::SafetensorsFile::open(a.out);
  for (const auto& e : file.entries()) EXPECT_EQ(e.dtype, DType::bf16) << e.name;
}

TEST_F(Export, AnAdapterForALayerTheBaseLacksIsAnError) {
  // A base without layer 1: the adapter's layer-1 weights have nothing to merge into.
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, t] : base_->named_parameters())
    if (name.find("layers.1.") == std::string::npos) tensors.emplace_back(name, t);
  io::save_safetensors((dir_ / "short.safetensors").string(), tensors);
  ExportArgs a;
  a.merge = (dir_ / "adapter").string();
  a.base = (dir_ / "short.safetensors").string();
  a.out = (dir_ / "x.safetensors").string();
  std::ostringstream out;
  testing::expect_error([&] { export_merged(a, out); }, "[export]",
                        "the adapter adapts 'model.layers.1.");
  a.base = (dir_ / "base.safetensors").string();
  a.dtype = "f8";
  testing::expect_error([&] { export_merged(a, out); }, "[export]",
                        "--dtype must be bf16, f16 or f32");
}

// The rank is the weights': an adapter_config.json whose r disagrees with the factors is refused
// by a merge (its lora_alpha / r would scale the merge wrongly) as by loading the adapter, both
// naming a factor and both ranks.
TEST_F(Export, AnAdapterConfigWhoseRIsNotTheWeightsRankIsRefused) {
  const fs::path config = dir_ / "adapter" / "adapter_config.json";
  nlohmann::json j = nlohmann::json::parse(std::ifstream(config));
  j["r"] = 8;
  std::ofstream(config, std::ios::trunc) << j.dump();
  ExportArgs a;
  a.merge = (dir_ / "adapter").string();
  a.base = (dir_ / "base.safetensors").string();
  a.out = (dir_ / "merged.safetensors").string();
  std::ostringstream out;
  testing::expect_error(
      [&] { export_merged(a, out); }, "[export] --merge",
      "q_proj.lora_A.weight' has rank 4 (shape (4, 64)), adapter_config.json's r is 8");
  EXPECT_FALSE(fs::exists(a.out));
  nn::LoraConfig eight = lora_config_;
  eight.r = 8;
  nn::BuildOptions o;
  o.linear_factory = nn::targeted_factory(
      std::make_shared<nn::TargetModules>(nn::TargetModules::parse("q_proj,down_proj")),
      nn::lora_factory(eight));
  const auto model = nn::build_model(nn::preset("llama-tiny"), o);
  testing::expect_error([&] { nn::load_lora_adapter(*model, a.merge); }, "[adapter]",
                        "q_proj.lora_A.weight' has rank 4 (shape (4, 64)), adapter_config.json's "
                        "r is 8");
}

// Note [Model folders written]: the transformers-saved tiny Llama 3.1 folder exported in
// f32 with small shards loads back (shards, index, config.json with every key and the new
// torch_dtype) to the same logits; a merge into a folder gives PEFT's merged logits for the
// committed PEFT fixture; what cannot be written is named.
TEST_F(Export, AModelFolderLoadsBackAsItsSource) {
  const std::string source = std::string(FITGRAD_GOLDEN_DIR) + "/hf_llama31_tiny/model";
  ExportArgs a;
  a.base = source;
  a.out = (dir_ / "folder").string();
  a.dtype = "f32";
  a.max_shard_size = "40KB";
  std::ostringstream log;
  EXPECT_EQ(export_merged(a, log), 0);
  EXPECT_NE(log.str().find("in 4 shards, config.json, generation_config.json"), std::string::npos)
      << log.str();
  const nlohmann::json index =
      nlohmann::json::parse(std::ifstream(dir_ / "folder" / "model.safetensors.index.json"));
  int64_t bytes = 0;
  for (const auto& [name, file] : index.at("weight_map").items()) {
    const io::SafetensorsFile shard = io::SafetensorsFile::open((dir_ / "folder" / file).string());
    ASSERT_TRUE(shard.has(name)) << name;
    bytes += int64_t(shard.tensor(name).nbytes());
  }
  EXPECT_EQ(index.at("metadata").at("total_size").get<int64_t>(), bytes);
  const nlohmann::json config =
      nlohmann::json::parse(std::ifstream(dir_ / "folder" / "config.json"));
  EXPECT_EQ(config.at("torch_dtype"), "float32");
  EXPECT_EQ(config.at("rope_scaling").at("rope_type"), "llama3");
  EXPECT_EQ(config.at("pretraining_tp"), 1);  // a key fitgrad does not use, kept
  const LoadedModel original = load_model(source, "", {}), exported = load_model(a.out, "", {});
  autograd::NoGradGuard no_grad;
  const Tensor ids =
      Tensor::from_vector(std::vector<int32_t>{5, 77, 200, 3, 9}, {1, 5}, DType::i32);
  EXPECT_EQ(exported.model->forward(ids).to_vector<float>(),
            original.model->forward(ids).to_vector<float>());
  EXPECT_EQ(exported.stop_ids, original.stop_ids);  // generation_config.json came along
  // A second export into the same folder is refused without --overwrite.
  testing::expect_error([&] { export_merged(a, log); }, "[export] -o", "--overwrite");
}

// Note [An export replaces an export]: 4 shards and their index, then one file with --overwrite,
// then 2 shards: each export leaves none of the earlier one's weight files, and never the
// user's other files; without --overwrite the earlier shards are named.
TEST_F(Export, AnOverwrittenFolderKeepsNoWeightFileOfTheEarlierExport) {
  ExportArgs a;
  a.base = std::string(FITGRAD_GOLDEN_DIR) + "/hf_llama31_tiny/model";
  a.out = (dir_ / "folder").string();
  a.dtype = "f32";
  a.max_shard_size = "40KB";
  std::ostringstream log;
  export_merged(a, log);
  std::ofstream(dir_ / "folder" / "notes.txt") << "mine";
  std::ofstream(dir_ / "folder" / "model-extra.safetensors") << "mine";
  const auto listing = [&] {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_ / "folder"))
      names.insert(e.path().filename().string());
    return names;
  };
  const std::set<std::string> others = {"config.json", "generation_config.json", "notes.txt",
                                        "model-extra.safetensors"};
  a.max_shard_size = "5GB";
  testing::expect_error([&] { export_merged(a, log); }, "[export] -o",
                        "model-00001-of-00004.safetensors exists; pass --overwrite");
  EXPECT_TRUE(fs::exists(dir_ / "folder" / "model-00004-of-00004.safetensors"));
  a.overwrite = true;
  export_merged(a, log);
  std::set<std::string> want = others;
  want.insert("model.safetensors");
  EXPECT_EQ(listing(), want);
  a.max_shard_size = "100KB";
  export_merged(a, log);
  want = others;
  want.insert({"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
               "model.safetensors.index.json"});
  EXPECT_EQ(listing(), want);
  const LoadedModel original = load_model(a.base, "", {}), exported = load_model(a.out, "", {});
  autograd::NoGradGuard no_grad;
  const Tensor ids = Tensor::from_vector(std::vector<int32_t>{5, 77, 200}, {1, 3}, DType::i32);
  EXPECT_EQ(exported.model->forward(ids).to_vector<float>(),
            original.model->forward(ids).to_vector<float>());
}

TEST_F(Export, AMergeIntoAFolderGivesPeftsMergedLogits) {
  const std::string fixture = std::string(FITGRAD_GOLDEN_DIR) + "/peft_tiny";
  ExportArgs a;
  a.merge = fixture + "/adapter";
  a.base = fixture + "/base";
  a.out = (dir_ / "merged").string();
  a.dtype = "f32";
  std::ostringstream log;
  EXPECT_EQ(export_merged(a, log), 14);  // 7 projections in 2 layers
  EXPECT_TRUE(fs::is_regular_file(dir_ / "merged" / "model.safetensors"));
  const testing::GoldenFile golden(testing::golden_path("peft_tiny/peft_logits.gtb"));
  const LoadedModel merged = load_model(a.out, "", {});
  autograd::NoGradGuard no_grad;
  const std::vector<double> got =
      testing::to_f64(merged.model->forward(golden.tensor("input_ids")));
  const std::vector<double> want = testing::to_f64(golden.tensor("lora_merged_logits"));
  EXPECT_TRUE(testing::all_close(got, want, 1e-4, 1e-5));
}

TEST_F(Export, WhatAFolderCannotBeIsNamed) {
  ExportArgs a;
  a.base = (dir_ / "base.safetensors").string();
  a.out = (dir_ / "x.safetensors").string();
  std::ostringstream log;
  testing::expect_error([&] { export_merged(a, log); }, "[export] -o",
                        "one .safetensors file is written for a merge (give --merge)");
  a.out = (dir_ / "folder").string();
  testing::expect_error([&] { export_merged(a, log); }, "[export] --base",
                        "a model folder needs its config.json, and there is none beside the file");
  // An existing file as -o without an extension says what each kind of output needs.
  std::ofstream(dir_ / "notes") << "mine";
  a.out = (dir_ / "notes").string();
  testing::expect_error([&] { export_merged(a, log); }, "[export] -o " + a.out,
                        "is an existing file, and a path without the extension .gguf");
  a.out = (dir_ / "folder").string();
  a.base = std::string(FITGRAD_GOLDEN_DIR) + "/hf_llama31_tiny/model";
  a.max_shard_size = "big";
  testing::expect_error([&] { export_merged(a, log); }, "[export] --max_shard_size", "got 'big'");
  EXPECT_FALSE(fs::exists(dir_ / "folder"));  // nothing was written
}

}  // namespace
}  // namespace fitgrad::apps
