// A tiny model folder for instruction-data runs: a 2-layer Llama config.json beside the golden
// qwen2_style tokenizer.json and SmolLM2's chat template (chat_template.jinja), as the model
// specs of train/model_source.h read a Hugging Face folder.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

namespace fitgrad::testing {

// Writes the folder into `dir` (created when missing); returns its config.json's path.
inline std::string write_sft_model_folder(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  const fs::path golden(FITGRAD_GOLDEN_DIR);
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"model_type": "llama", "vocab_size": 704,
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256,
    "rms_norm_eps": 1e-5, "tie_word_embeddings": false})";
  fs::copy_file(golden / "hf_tokenizers" / "qwen2_style" / "tokenizer.json", dir / "tokenizer.json",
                fs::copy_options::overwrite_existing);
  fs::copy_file(golden / "chat_templates" / "smollm2.jinja", dir / "chat_template.jinja",
                fs::copy_options::overwrite_existing);
  return (dir / "config.json").string();
}

}  // namespace fitgrad::testing
