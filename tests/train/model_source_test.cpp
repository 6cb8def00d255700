// Model specs (train/model_source.h): a preset, a config.json, a checkpoint directory
// written here (config_to_json + save_safetensors + save_tokenizer_spec) that loads back to
// the same logits, --init files with strict names, tokenizer ids, and the errors of every
// kind of bad spec. The SmolLM2 GGUF cases skip when the file is absent.
#include "train/model_source.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "autograd/grad_mode.h"
#include "io/safetensors.h"
#include "nn/config.h"
#include "tests/io/smollm2_file.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::apps {

using train::save_tokenizer_spec;

using train::default_tokenizer;
using train::load_model;
using train::load_tokenizer_spec;
using train::LoadedModel;
using train::make_tokenizer;
using train::TokenizerSpec;
namespace {

namespace fs = std::filesystem;
using fitgrad::testing::expect_error;

fs::path fresh_dir(const std::string& stem) {
  const fs::path dir =
      fs::temp_directory_path() / ("fitgrad_apps_" + stem + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A checkpoint directory as a trainer writes it.
void write_checkpoint(const nn::CausalLM& m, const fs::path& dir, const std::string& tokenizer) {
  std::ofstream(dir / "config.json") << nn::config_to_json(m.config()).dump(2);
  io::save_safetensors((dir / "model.safetensors").string(), m.named_parameters());
  save_tokenizer_spec(dir.string(), tokenizer);
}

std::vector<float> logits(const nn::CausalLM& m) {
  autograd::NoGradGuard no_grad;
  const Tensor ids = Tensor::from_vector(std::vector<int32_t>{72, 105, 33, 10}, {1, 4}, DType::i32);
  return m.forward(ids).to_vector<float>();
}

TEST(ModelSource, PresetWithItsDefaultTokenizer) {
  const LoadedModel m = load_model("gpt2-tiny", "", {.seed = 4});
  EXPECT_EQ(m.model->config().name, "gpt2-tiny");
  EXPECT_EQ(m.tokenizer_id, "byte");
  EXPECT_EQ(m.tokenizer->decode(m.tokenizer->encode("héllo")), "héllo");
  EXPECT_NE(m.description.find("random (seed 4)"), std::string::npos) << m.description;
  // The same seed builds the same weights as build_model.
  EXPECT_EQ(logits(*m.model), logits(*nn::build_model(nn::preset("gpt2-tiny"), {.seed = 4})));
}

TEST(ModelSource, DefaultTokenizerByVocabularySize) {
  std::string id;
  EXPECT_EQ(default_tokenizer(nn::preset("llama-tiny"), &id)->vocab_size(), 256);
  EXPECT_EQ(id, "byte");
  const auto gpt2 = default_tokenizer(nn::preset("gpt2"), &id);
  EXPECT_EQ(id, "gpt2");
  EXPECT_EQ(gpt2->vocab_size(), 50257);
  EXPECT_EQ(gpt2->encode("Hello world"), (std::vector<int32_t>{15496, 995}));  // GPT-2's ids
  expect_error([] { default_tokenizer(nn::preset("llama2-7b"), nullptr); }, "[model llama2-7b]",
               "vocabulary of 32000 tokens");
}

// Note [No tokenizer on meta]: a dry run of a model without a default tokenizer loads; on
// a real device the same model is the error above.
TEST(ModelSource, OnMetaAModelNeedsNoTokenizer) {
  nn::BuildOptions o;
  o.device = Device::meta();
  const LoadedModel m = load_model("llama2-7b", "", o);
  EXPECT_EQ(m.tokenizer, nullptr);
  EXPECT_EQ(m.tokenizer_id, "none");
  EXPECT_NE(m.description.find("tokenizer: none"), std::string::npos) << m.description;
  nn::ModelConfig cfg = nn::preset("llama-tiny");
  cfg.vocab_size = 300;
  const std::string path =
      ::testing::TempDir() + "fitgrad_vocab300_" + std::to_string(::getpid()) + ".json";
  std::ofstream(path) << nn::config_to_json(cfg).dump();
  expect_error([&] { load_model(path, "", {}); }, "[model", "vocabulary of 300 tokens");
  std::filesystem::remove(path);
}

TEST(ModelSource, CheckpointDirectoryLoadsBackTheSameModel) {
  const fs::path dir = fresh_dir("ckpt");
  for (const char* name : {"gpt2-tiny", "llama-tiny"}) {
    const auto original = nn::build_model(nn::preset(name), {.seed = 9});
    write_checkpoint(*original, dir, "byte");
    const LoadedModel m = load_model(dir.string(), "", {.seed = 1});
    EXPECT_EQ(m.tokenizer_id, "byte");
    EXPECT_EQ(logits(*m.model), logits(*original)) << name;
    EXPECT_NE(m.description.find("model.safetensors"), std::string::npos) << m.description;
    // The config.json alone: the same architecture, random weights.
    const LoadedModel fresh = load_model((dir / "config.json").string(), "", {.seed = 9});
    EXPECT_EQ(fresh.model->num_parameters(), original->num_parameters());
    EXPECT_EQ(fresh.tokenizer_id, "byte");
  }
  fs::remove_all(dir);
}

// A Hugging Face folder in shards (Note [Sharded model folders]): the parameters spread over
// three shard files in the order Module lists them, and the index that places them.
void write_sharded(const nn::CausalLM& m, const fs::path& dir) {
  std::ofstream(dir / "config.json") << nn::config_to_json(m.config()).dump(2);
  const auto params = m.named_parameters();
  std::vector<std::vector<std::pair<std::string, Tensor>>> shards(3);
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t i = 0; i < params.size(); ++i) {
    const size_t k = i * 3 / params.size();
    shards[k].push_back(params[i]);
    weight_map[params[i].first] = "model-0000" + std::to_string(k + 1) + "-of-00003.safetensors";
  }
  for (size_t k = 0; k < 3; ++k)
    io::save_safetensors(
        (dir / ("model-0000" + std::to_string(k + 1) + "-of-00003.safetensors")).string(),
        shards[k]);
  std::ofstream(dir / "model.safetensors.index.json")
      << nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump(2);
}

TEST(ModelSource, ShardedFolderLoadsTheSameModelAsOneFile) {
  const fs::path dir = fresh_dir("sharded");
  for (const char* name : {"gpt2-tiny", "llama-tiny"}) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    const auto original = nn::build_model(nn::preset(name), {.seed = 11});
    write_sharded(*original, dir);
    const LoadedModel m = load_model(dir.string(), "", {.seed = 1});
    EXPECT_EQ(logits(*m.model), logits(*original)) << name;
    EXPECT_NE(m.description.find("model.safetensors.index.json"), std::string::npos)
        << m.description;
  }
  fs::remove_all(dir);
}

// memplan and dry runs build on meta, where weights hold no values: a folder with only its
// config.json is enough there, and elsewhere its missing weights are named.
TEST(ModelSource, OnMetaAFolderNeedsOnlyItsConfig) {
  const fs::path dir = fresh_dir("config_only");
  std::ofstream(dir / "config.json") << nn::config_to_json(nn::preset("llama3.2-1b")).dump(2);
  nn::BuildOptions meta;
  meta.device = Device::meta();
  const LoadedModel m = load_model(dir.string(), "", meta);
  EXPECT_EQ(m.model->num_parameters(), 1'235'814'400);
  EXPECT_NE(m.description.find("weights: not read"), std::string::npos) << m.description;
  expect_error([&] { load_model(dir.string(), "", {}); }, "[model " + dir.string() + "]",
               "has neither model.safetensors nor model.safetensors.index.json");
  // A LoRA checkpoint or adapter folder given as a model is named, with its base.
  std::ofstream(dir / "adapter_config.json") << R"({"base_model_name_or_path": "llama-tiny"})";
  expect_error([&] { load_model(dir.string(), "", {}); }, "[model " + dir.string() + "]",
               "is a LoRA adapter (adapter_config.json), not a model: give its base, --model "
               "llama-tiny, with --adapter " +
                   dir.string());
  fs::remove_all(dir);
}

// A folder whose model.safetensors (or index) is a directory is refused by that name, on the
// CPU and on meta alike, not read as a folder without weights.
TEST(ModelSource, AWeightsEntryThatIsNoFileIsNamed) {
  const fs::path dir = fresh_dir("weights_dir");
  std::ofstream(dir / "config.json") << nn::config_to_json(nn::preset("llama-tiny")).dump(2);
  for (const char* name : {"model.safetensors", "model.safetensors.index.json"}) {
    fs::create_directories(dir / name);
    nn::BuildOptions meta;
    meta.device = Device::meta();
    for (const nn::BuildOptions& o : {nn::BuildOptions{}, meta})
      expect_error([&] { load_model(dir.string(), "", o); }, "[model " + dir.string() + "]",
                   std::string(name) + " is a directory: a folder's weights are the file");
    fs::remove(dir / name);
  }
  fs::remove_all(dir);
}

TEST(ModelSource, ShardsThatDisagreeWithTheirIndexAreNamed) {
  const fs::path dir = fresh_dir("shard_errors");
  const auto original = nn::build_model(nn::preset("llama-tiny"), {.seed = 11});
  const fs::path index = dir / "model.safetensors.index.json";
  const auto rewrite_index = [&](const std::function<void(nlohmann::json&)>& change) {
    nlohmann::json j = nlohmann::json::parse(std::ifstream(index));
    change(j);
    std::ofstream(index) << j.dump();
  };
  const std::string first = original->named_parameters().front().first;
  const std::string last = original->named_parameters().back().first;
  // A missing shard.
  write_sharded(*original, dir);
  fs::remove(dir / "model-00002-of-00003.safetensors");
  expect_error([&] { load_model(dir.string(), "", {}); }, "[model " + dir.string() + "]",
               "names the shard " + (dir / "model-00002-of-00003.safetensors").string());
  // The index moves a tensor to another shard: its own shard, read first, holds it.
  write_sharded(*original, dir);
  rewrite_index(
      [&](nlohmann::json& j) { j["weight_map"][first] = "model-00003-of-00003.safetensors"; });
  expect_error([&] { load_model(dir.string(), "", {}); }, "[model " + dir.string() + "]",
               "model.safetensors.index.json does not place '" + first + "' in " +
                   (dir / "model-00001-of-00003.safetensors").string() + ", which holds it");
  // A shard holds a tensor the index does not place anywhere.
  write_sharded(*original, dir);
  rewrite_index([&](nlohmann::json& j) { j["weight_map"].erase(last); });
  expect_error([&] { load_model(dir.string(), "", {}); }, "[model " + dir.string() + "]",
               "model.safetensors.index.json does not place '" + last + "' in");
  // An index naming a tensor that no shard holds.
  write_sharded(*original, dir);
  rewrite_index([&](nlohmann::json& j) {
    j["weight_map"]["model.extra.weight"] = "model-00001-of-00003.safetensors";
  });
  expect_error([&] { load_model(dir.string(), "", {}); }, "[model " + dir.string() + "]",
               "places 'model.extra.weight' in");
  // Not an index at all.
  std::ofstream(index) << R"({"metadata": {}})";
  expect_error([&] { load_model(dir.string(), "", {}); }, "[model " + dir.string() + "]",
               "has no object 'weight_map'");
  std::ofstream(index) << "{";
  expect_error([&] { load_model(dir.string(), "", {}); }, "[model " + dir.string() + "]",
               "invalid JSON");
  fs::remove_all(dir);
}

// A Hugging Face folder's tokenizer.json and tokenizer_config.json (data/hf_tokenizer.h):
// the model loads with that tokenizer, its roles from the config, and a checkpoint's
// fitgrad_tokenizer.json keeps its vocabulary (kind "hf"), so it decodes without the file.
TEST(ModelSource, AHuggingFaceFolderBringsItsTokenizer) {
  const fs::path dir = fresh_dir("hf_tokenizer");
  const std::string golden = std::string(FITGRAD_GOLDEN_DIR) + "/hf_tokenizers/llama3_style";
  nn::ModelConfig cfg = nn::preset("llama-tiny");
  cfg.vocab_size = 703;  // the golden tokenizer's ids 0..702
  const auto original = nn::build_model(cfg, {.seed = 3});
  std::ofstream(dir / "config.json") << nn::config_to_json(cfg).dump(2);
  io::save_safetensors((dir / "model.safetensors").string(), original->named_parameters());
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(fs::path(golden) / f, dir / f);
  const LoadedModel m = load_model(dir.string(), "", {});
  EXPECT_EQ(m.tokenizer_id, "hf:" + (dir / "tokenizer.json").string());
  EXPECT_EQ(m.tokenizer->eos(), 2);  // tokenizer_config.json's <|eot_id|>
  EXPECT_EQ(m.tokenizer->bos(), 0);
  const std::string text = "It is a truth universally acknowledged<|eot_id|>";
  const std::vector<int32_t> ids = m.tokenizer->encode(text, true);
  EXPECT_EQ(ids.back(), 2);
  EXPECT_EQ(logits(*m.model), logits(*original));
  // The folder's config.json alone (a random init) takes the tokenizer beside it.
  EXPECT_EQ(load_model((dir / "config.json").string(), "", {}).tokenizer_id, m.tokenizer_id);
  // A checkpoint stores the vocabulary; it loads back without the tokenizer.json.
  const fs::path ckpt = fresh_dir("hf_tokenizer_ckpt");
  save_tokenizer_spec(ckpt.string(), m.tokenizer_id, m.tokenizer_vocabulary);
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(ckpt / "fitgrad_tokenizer.json")).at("kind"), "hf");
  fs::remove(dir / "tokenizer.json");
  const TokenizerSpec spec = load_tokenizer_spec(ckpt.string());
  EXPECT_EQ(spec.make()->encode(text, true), ids);
  EXPECT_EQ(spec.make()->eos(), 2);
  // A tokenizer with more ids than the model's vocabulary is refused.
  const fs::path small = fresh_dir("hf_tokenizer_small");
  write_checkpoint(*nn::build_model(nn::preset("llama-tiny"), {}), small, "byte");
  fs::remove(small / "fitgrad_tokenizer.json");
  fs::copy_file(fs::path(golden) / "tokenizer.json", small / "tokenizer.json");
  expect_error([&] { load_model(small.string(), "", {}); }, "[model " + small.string() + "]",
               "has 703 tokens, more than the model's vocabulary of 256");
  for (const fs::path& d : {dir, ckpt, small}) fs::remove_all(d);
}

TEST(ModelSource, InitSafetensorsReplacesTheWeightsStrictly) {
  const fs::path dir = fresh_dir("init");
  const auto trained = nn::build_model(nn::preset("llama-tiny"), {.seed = 21});
  const std::string file = (dir / "w.safetensors").string();
  io::save_safetensors(file, trained->named_parameters());
  const LoadedModel m = load_model("llama-tiny", file, {.seed = 1});
  EXPECT_EQ(logits(*m.model), logits(*trained));
  EXPECT_NE(m.description.find("w.safetensors"), std::string::npos) << m.description;
  // Llama weights into GPT-2: the names do not match, and the error lists them.
  expect_error([&] { load_model("gpt2-tiny", file, {}); }, "[model gpt2-tiny] the weights in",
               "transformer.wte.weight");
  expect_error([&] { load_model("gpt2-tiny", (dir / "none.safetensors").string(), {}); }, "[model]",
               "does not exist");
  expect_error([&] { load_model("gpt2-tiny", (dir / "w.bin").string(), {}); }, "[model]",
               "does not exist");
  std::ofstream(dir / "w.bin") << "x";
  expect_error([&] { load_model("gpt2-tiny", (dir / "w.bin").string(), {}); }, "[model]",
               "must be a .safetensors or .gguf file");
  fs::remove_all(dir);
}

TEST(ModelSource, TokenizerSpecsRoundTrip) {
  const fs::path dir = fresh_dir("tok");
  for (const std::string id : {"byte", "gpt2", "gguf:/models/x.gguf"}) {
    save_tokenizer_spec(dir.string(), id);
    EXPECT_EQ(load_tokenizer_spec(dir.string()).id, id);
  }
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(dir / "fitgrad_tokenizer.json"));
  EXPECT_EQ(j.at("kind"), "gguf");
  EXPECT_EQ(j.at("path"), "/models/x.gguf");
  // A Hugging Face tokenizer file in its place is no fitgrad spec.
  std::ofstream(dir / "fitgrad_tokenizer.json")
      << R"({"version": "1.0", "model": {"type": "BPE"}})";
  expect_error([&] { load_tokenizer_spec(dir.string()); }, "[tokenizer", "no string key 'kind'");
  expect_error([&] { save_tokenizer_spec(dir.string(), "sentencepiece"); }, "[tokenizer]",
               "unknown tokenizer id 'sentencepiece'");
  expect_error([] { make_tokenizer("bpe"); }, "[tokenizer]", "unknown tokenizer id 'bpe'");
  fs::remove_all(dir);
}

TEST(ModelSource, BadSpecsAreNamed) {
  const fs::path dir = fresh_dir("bad");
  expect_error([] { load_model("gpt3", "", {}); }, "[config]", "unknown preset 'gpt3'");
  expect_error([] { load_model("/no/such/model.gguf", "", {}); }, "[model /no/such/model.gguf]",
               "no such file or directory");
  expect_error([] { load_model("missing/config.json", "", {}); }, "[model missing/config.json]",
               "no such file or directory");
  expect_error([&] { load_model(dir.string(), "", {}); }, "[model " + dir.string() + "]",
               "has no config.json");
  std::ofstream(dir / "config.json") << nn::config_to_json(nn::preset("gpt2-tiny")).dump();
  expect_error([&] { load_model(dir.string(), "", {}); }, "[model " + dir.string() + "]",
               "has neither model.safetensors nor model.safetensors.index.json");
  // An existing file is never "no such file" (issue 31): a bare weights file says that its
  // config is missing, and how to give both when one lies beside it.
  const fs::path bare = dir / "sub" / "x.safetensors";
  fs::create_directories(bare.parent_path());
  io::save_safetensors(bare.string(),
                       nn::build_model(nn::preset("gpt2-tiny"), {})->named_parameters());
  expect_error([&] { load_model(bare.string(), "", {}); }, "[model " + bare.string() + "]",
               "holds weights only: a model also needs its config.json. There is none beside it (" +
                   (bare.parent_path() / "config.json").string() + ")");
  fs::copy_file(dir / "config.json", bare.parent_path() / "config.json");
  expect_error(
      [&] { load_model(bare.string(), "", {}); }, "[model " + bare.string() + "]",
      "Give --model " + (bare.parent_path() / "config.json").string() + " --init " + bare.string());
  std::ofstream(dir / "model.txt") << "x";
  expect_error([&] { load_model((dir / "model.txt").string(), "", {}); }, "[model",
               "is a file, but neither a config.json (.json) nor a .gguf file");
  fs::remove_all(dir);
}

TEST(ModelSource, GgufSpecAndGgufInitGiveTheSameModel) {
  const std::string gguf = test::smollm2_path();
  if (!fs::is_regular_file(gguf)) GTEST_SKIP() << test::smollm2_skip_message();
  const LoadedModel a = load_model(gguf, "", {});
  EXPECT_EQ(a.tokenizer_id, "gguf:" + gguf);
  EXPECT_EQ(a.model->config().vocab_size, 49152);
  EXPECT_EQ(a.tokenizer->vocab_size(), 49152);
  EXPECT_EQ(a.tokenizer->decode(a.tokenizer->encode("The capital of France")),
            "The capital of France");
  // The preset with the file as --init: the same weights, and the file's tokenizer.
  const LoadedModel b = load_model("smollm2-135m", gguf, {});
  EXPECT_EQ(b.tokenizer_id, a.tokenizer_id);
  for (const char* name :
       {"model.embed_tokens.weight", "model.layers.3.self_attn.k_proj.weight", "model.norm.weight"})
    EXPECT_EQ(a.model->parameter(name).to_vector<float>(),
              b.model->parameter(name).to_vector<float>())
        << name;
}

}  // namespace
}  // namespace fitgrad::apps
