// A user's Hugging Face folder end to end (issue "Bring your own model"): a config.json with
// rope_scaling llama3 beside the golden Llama 3-style tokenizer.json and tokenizer_config.json
// (tests/golden/hf_tokenizers/llama3_style) trains from a random init with that tokenizer; the
// checkpoint keeps the tokenizer's vocabulary (kind hf); `export` writes a model folder whose
// tokenizer.json encodes as the original does and whose weights give the checkpoint's logits.
// The same with a Mistral folder: a sliding window, a SentencePiece-style tokenizer.json and a
// chat_template.jinja that takes priority over tokenizer_config.json's template.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/export.h"
#include "autograd/grad_mode.h"
#include "data/gguf_tokenizer.h"
#include "data/hf_tokenizer.h"
#include "tests/train/train_fixture.h"
#include "train/model_source.h"

namespace fitgrad::apps::test_train {

using train::load_model;

using train::folder_weights;
using train::LoadedModel;
using train::TrainArgs;
namespace {

class HfFolderFlow : public TrainFixture {};

TEST_F(HfFolderFlow, TrainFromAFolderThenExportItBack) {
  const fs::path golden = fs::path(FITGRAD_GOLDEN_DIR) / "hf_tokenizers" / "llama3_style";
  const fs::path folder = root_ / "user_model";
  fs::create_directories(folder);
  std::ofstream(folder / "config.json") << R"({"model_type": "llama", "vocab_size": 703,
    "hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128,
    "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "tie_word_embeddings": false,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 64}})";
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(golden / f, folder / f);

  TrainArgs a = args(write_text("text.txt", 3001, 4), "run");
  a.model = (folder / "config.json").string();
  a.max_steps = 2;
  a.save_steps = 2;
  ASSERT_EQ(train(a), 0);
  const fs::path checkpoint = root_ / "run" / "checkpoint-2";
  const nlohmann::json spec =
      nlohmann::json::parse(std::ifstream(checkpoint / "fitgrad_tokenizer.json"));
  EXPECT_EQ(spec.at("kind"), "hf");

  ExportArgs e;
  e.base = checkpoint.string();
  e.out = (root_ / "exported").string();
  e.dtype = "f32";
  std::ostringstream log;
  export_merged(e, log);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json",
                        "tokenizer_config.json", "generation_config.json"})
    EXPECT_TRUE(fs::is_regular_file(root_ / "exported" / f)) << f << "\n" << log.str();
  const nlohmann::json config =
      nlohmann::json::parse(std::ifstream(root_ / "exported" / "config.json"));
  EXPECT_EQ(config.at("rope_scaling").at("rope_type"), "llama3");

  const LoadedModel trained = load_model(checkpoint.string(), "", {});
  const LoadedModel exported = load_model(e.out, "", {});
  const auto original = data::tokenizer_from_vocabulary(
      data::hf_tokenizer_vocabulary((folder / "tokenizer.json").string()), "[test]");
  for (const char* text :
       {"It is a truth universally acknowledged<|eot_id|>", "In 1811, 42 <tool>"})
    EXPECT_EQ(exported.tokenizer->encode(text, true), original->encode(text, true)) << text;
  EXPECT_EQ(exported.tokenizer->eos(), 2);
  EXPECT_EQ(exported.stop_ids, std::vector<int32_t>{2});  // generation_config.json's
  autograd::NoGradGuard no_grad;
  const Tensor ids =
      Tensor::from_vector(std::vector<int32_t>{43, 86, 369, 261, 702}, {1, 5}, DType::i32);
  EXPECT_EQ(exported.model->forward(ids).to_vector<float>(),
            trained.model->forward(ids).to_vector<float>());
}

TEST_F(HfFolderFlow, AMistralFolderWithASentencePieceTokenizerAndAChatTemplate) {
  const fs::path golden = fs::path(FITGRAD_GOLDEN_DIR) / "hf_tokenizers" / "mistral_style";
  const fs::path folder = root_ / "mistral";
  fs::create_directories(folder);
  std::ofstream(folder / "config.json") << R"({"model_type": "mistral", "vocab_size": 1002,
    "hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128,
    "rms_norm_eps": 1e-5, "rope_theta": 1000000.0, "sliding_window": 8,
    "tie_word_embeddings": false})";
  fs::copy_file(golden / "tokenizer.json", folder / "tokenizer.json");
  nlohmann::json config = nlohmann::json::parse(std::ifstream(golden / "tokenizer_config.json"));
  config["chat_template"] = "{{ 'from the config' }}";
  std::ofstream(folder / "tokenizer_config.json") << config.dump();
  const std::string jinja = "{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}";
  std::ofstream(folder / "chat_template.jinja") << jinja;

  const LoadedModel loaded = load_model((folder / "config.json").string(), "", {});
  EXPECT_EQ(loaded.tokenizer_vocabulary.at("chat_template"), jinja);
  EXPECT_EQ(loaded.model->config().sliding_window, 8);
  const std::vector<int32_t> chat = loaded.tokenizer->encode("[INST] Hi [/INST]", true);
  ASSERT_GE(chat.size(), 3u);
  EXPECT_EQ(chat.front(), 1000);  // [INST]
  EXPECT_EQ(chat.back(), 1001);   // [/INST]

  TrainArgs a = args(write_text("text.txt", 3001, 4), "run");
  a.model = (folder / "config.json").string();
  a.max_steps = 2;
  a.save_steps = 2;
  ASSERT_EQ(train(a), 0);
  ExportArgs e;
  e.base = (root_ / "run" / "checkpoint-2").string();
  e.out = (root_ / "exported").string();
  e.dtype = "f32";
  std::ostringstream log;
  export_merged(e, log);
  const nlohmann::json written =
      nlohmann::json::parse(std::ifstream(root_ / "exported" / "tokenizer_config.json"));
  EXPECT_EQ(written.value("chat_template", std::string()), jinja) << log.str();
  const LoadedModel exported = load_model(e.out, "", {});
  EXPECT_EQ(exported.model->config().sliding_window, 8);
  for (const char* text : {"It is a truth universally acknowledged", "[INST] Hi [/INST] Fine."})
    EXPECT_EQ(exported.tokenizer->encode(text, true), loaded.tokenizer->encode(text, true)) << text;
}

// Note [Multimodal folders]: a Gemma 3 folder with a vision tower exports as its text model,
// which loads with the same logits.
TEST_F(HfFolderFlow, AMultimodalGemma3FolderExportsItsTextModel) {
  ExportArgs e;
  e.base = (fs::path(FITGRAD_GOLDEN_DIR) / "hf_gemma3_mm_tiny" / "model").string();
  e.out = (root_ / "exported").string();
  e.dtype = "f32";
  std::ostringstream log;
  export_merged(e, log);
  EXPECT_NE(log.str().find("without its vision tower"), std::string::npos) << log.str();
  const nlohmann::json config =
      nlohmann::json::parse(std::ifstream(root_ / "exported" / "config.json"));
  EXPECT_EQ(config.at("model_type"), "gemma3_text");
  EXPECT_EQ(config.at("architectures"), nlohmann::json::array({"Gemma3ForCausalLM"}));
  EXPECT_EQ(config.at("rms_norm_eps"), 1e-6);  // Gemma3TextConfig's default, written out
  const nn::TensorSource written = folder_weights(e.out);
  EXPECT_EQ(written.entries.size(), 1u + 2 * 13 + 1);
  for (const nn::TensorSource::Entry& entry : written.entries)
    EXPECT_TRUE(entry.name.starts_with("model.")) << entry.name;

  autograd::NoGradGuard no_grad;
  const Tensor ids = Tensor::from_vector(std::vector<int32_t>{5, 200, 17, 3}, {1, 4}, DType::i32);
  EXPECT_EQ(load_model(e.out, "", {}).model->forward(ids).to_vector<float>(),
            load_model(e.base, "", {}).model->forward(ids).to_vector<float>());
}

}  // namespace
}  // namespace fitgrad::apps::test_train
