// Paths the tokenizer tests read: the committed GPT-2 assets (data/assets/gpt2) and,
// when this checkout sits beside the shared data folder, the Austen corpus.
#pragma once

#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace fitgrad::data::testing {

inline std::string gpt2_test_asset_dir() {
#ifdef FITGRAD_SOURCE_DIR
  return FITGRAD_SOURCE_DIR "/data/assets/gpt2";
#else
  return FITGRAD_GOLDEN_DIR "/../../data/assets/gpt2";
#endif
}

inline std::optional<std::string> read_if_exists(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Austen's novels, the corpus embedded in the project (data/assets/austen.txt).
inline std::optional<std::string> austen_corpus() {
  return read_if_exists(std::string(FITGRAD_GOLDEN_DIR) + "/../../data/assets/austen.txt");
}

}  // namespace fitgrad::data::testing
