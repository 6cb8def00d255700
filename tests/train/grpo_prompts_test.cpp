// GRPO's prompt records (train/grpo_prompts.h) on the tiny SFT model folder (qwen2_style
// tokenizer, SmolLM2's chat template): the arithmetic task's conversational prompts are
// rendered with the generation prompt and keep their answer column, a text prompt is taken as
// it is, and each bad line is an error naming the file and line.
#include "train/grpo_prompts.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/train/sft_model_folder.h"

namespace fitgrad::train {
namespace {

namespace fs = std::filesystem;

LoadedModel model(const fs::path& dir) {
  return load_model(testing::write_sft_model_folder(dir / "model"), "", {});
}

TEST(GrpoPrompts, ConversationsGetTheGenerationPromptAndKeepTheirColumns) {
  const fs::path dir = fs::path(::testing::TempDir()) / "grpo_prompts_ok";
  const LoadedModel lm = model(dir);
  const std::string tasks = std::string(FITGRAD_SOURCE_DIR) + "/data/tasks/arithmetic/train.jsonl";
  const std::vector<GrpoPrompt> prompts = read_grpo_prompts(tasks, lm, "", 16);
  ASSERT_GT(prompts.size(), 10u);
  EXPECT_EQ(prompts[0].text.substr(prompts[0].text.size() - 22), "<|im_start|>assistant\n");
  EXPECT_NE(prompts[0].text.find("What is 3 plus 8?"), std::string::npos);
  EXPECT_EQ(prompts[0].row, (nlohmann::json{{"answer", "11"}}));
  EXPECT_EQ(prompts[0].ids, lm.tokenizer->encode(prompts[0].text, true));
  const fs::path text = dir / "text.jsonl";
  std::ofstream(text) << R"({"prompt": "2+2=", "answer": 4, "id": "a"})"
                      << "\n";
  const std::vector<GrpoPrompt> plain = read_grpo_prompts(text.string(), lm, "", 16);
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0].text, "2+2=");
  EXPECT_EQ(plain[0].row, (nlohmann::json{{"answer", 4}, {"id", "a"}}));
}

TEST(GrpoPrompts, ABadLineIsAnErrorNamingItsFileAndLine) {
  const fs::path dir = fs::path(::testing::TempDir()) / "grpo_prompts_bad";
  const LoadedModel lm = model(dir);
  const std::pair<const char*, const char*> cases[] = {
      {"{\"prompt\": ", "is not JSON"},
      {"{\"question\": \"x\"}", "has no \"prompt\""},
      {"{\"prompt\": 3}", "neither text nor a list of messages"},
      {"{\"prompt\": \"\"}", "has no tokens"},
      {"{\"prompt\": \"1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20\"}", "do not fit"},
  };
  for (const auto& [line, want] : cases) {
    const fs::path f = dir / "bad.jsonl";
    std::ofstream(f) << R"({"prompt": "ok"})"
                     << "\n"
                     << line << "\n";
    try {
      read_grpo_prompts(f.string(), lm, "", 240);
      ADD_FAILURE() << line;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(f.string() + " line 2"), std::string::npos) << what;
      EXPECT_NE(what.find(want), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace fitgrad::train
