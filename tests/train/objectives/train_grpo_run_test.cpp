// `fitgrad train --objective grpo` as a run (train/train_grpo.cpp, Note [GRPO runs]) on the
// tiny model folder of tests/train/sft_model_folder.h with a LoRA adapter and the committed
// arithmetic task: each step's completions are scored by a --reward_command (awk: the length
// of the completion's JSON line modulo 7, so that the rewards of a group differ), the metrics
// carry TRL's GRPO names, samples.jsonl holds a few completions with their rewards, and a run
// resumed from its middle checkpoint repeats the uninterrupted run bit for bit: the same
// rewards (the same completions, so the same draws and prompts), losses and adapter.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/train/sft_model_folder.h"
#include "tests/train/train_fixture.h"

namespace fitgrad::apps::test_train {
namespace {

class TrainGrpoRun : public TrainFixture {
 protected:
  TrainArgs grpo_args(const std::string& out) {
    TrainArgs a = args(std::string(FITGRAD_SOURCE_DIR) + "/data/tasks/arithmetic/train.jsonl", out);
    a.model = fitgrad::testing::write_sft_model_folder(root_ / "model");
    a.objective = "grpo";
    a.lora_r = 4;
    a.lora_alpha = 8;
    a.num_generations = 4;
    a.per_device_train_batch_size = 4;
    a.gradient_accumulation_steps = 2;  // 2 prompts a step
    a.max_completion_length = 8;
    a.reward_command = "awk '{print length($0) % 7}'";
    a.learning_rate = 2e-2;
    a.max_steps = 4;
    a.save_steps = 2;
    a.write_memory_record = false;  // the memory record of a run is tested elsewhere
    return a;
  }
};

TEST_F(TrainGrpoRun, LogsTrlsMetricsAndSamples) {
  const TrainArgs a = grpo_args("run");
  ASSERT_EQ(train(a), 0) << last_err_;
  EXPECT_NE(last_out_.find("500 prompts; a step samples 4 completions of each of 2 prompts"),
            std::string::npos)
      << last_out_;
  const std::vector<nlohmann::json> rows = metrics(a.output_dir);
  ASSERT_EQ(rows.size(), 4u);
  for (const nlohmann::json& r : rows)
    for (const char* key :
         {"loss", "reward", "reward_std", "frac_reward_zero_std", "rewards/command/mean",
          "rewards/command/std", "completions/mean_length", "completions/min_length",
          "completions/max_length", "completions/clipped_ratio", "clip_ratio/low_mean",
          "clip_ratio/high_mean", "clip_ratio/region_mean", "entropy"})
      EXPECT_TRUE(r.contains(key)) << key << " in " << r.dump();
  EXPECT_GT(rows[0].at("reward_std").get<double>(), 0.0);
  std::ifstream samples(fs::path(a.output_dir) / "samples.jsonl");
  int lines = 0;
  for (std::string line; std::getline(samples, line); ++lines) {
    const nlohmann::json s = nlohmann::json::parse(line);
    EXPECT_NE(s.at("prompt").get<std::string>().find("<|im_start|>assistant"), std::string::npos);
    EXPECT_TRUE(s.at("completion").is_string() && s.at("reward").is_number());
    EXPECT_LE(s.at("completion_tokens").get<int64_t>(), 8);
  }
  EXPECT_EQ(lines, 4 * 2 * 4);  // each logging step: both prompts' groups of 4
}

TEST_F(TrainGrpoRun, ResumeRepeatsTheUninterruptedRunBitForBit) {
  const TrainArgs full = grpo_args("full");
  ASSERT_EQ(train(full), 0) << last_err_;
  TrainArgs resumed = grpo_args("resumed");
  resumed.resume_from_checkpoint = (fs::path(full.output_dir) / "checkpoint-2").string();
  ASSERT_EQ(train(resumed), 0) << last_err_;
  const auto a = metrics(full.output_dir), b = metrics(resumed.output_dir);
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  for (size_t i = 0; i < a.size(); ++i)
    for (const char* key : {"step", "loss", "grad_norm", "reward", "completions/mean_length"})
      EXPECT_EQ(a[i].at(key), b[i].at(key)) << key << " at row " << i;
  EXPECT_EQ(
      read_bytes(fs::path(full.output_dir) / "checkpoint-4" / "adapter_model.safetensors"),
      read_bytes(fs::path(resumed.output_dir) / "checkpoint-4" / "adapter_model.safetensors"));
}

}  // namespace
}  // namespace fitgrad::apps::test_train
