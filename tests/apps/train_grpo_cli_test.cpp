// `fitgrad train --objective grpo` end to end, with the built binary (FITGRAD_CLI), on the tiny
// model folder of tests/train/sft_model_folder.h and the committed arithmetic task: a run
// trains and writes TRL's reward metrics and the samples file; a reward program that fails
// (a line that is not a number, a non-zero exit, too few lines, a time-out) stops the run
// with an error naming the command and the line, its last checkpoint kept and resumable;
// and bad flags and data are refused with messages that say what is wrong. A step samples
// TRL's default 8 completions of one prompt (--per_device_train_batch_size 4 x
// --gradient_accumulation_steps 2).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/train/sft_model_folder.h"

namespace fitgrad::apps {
namespace {

namespace fs = std::filesystem;

class GrpoCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::temp_directory_path() /
            (std::string("fitgrad_grpo_cli_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    model_ = fitgrad::testing::write_sft_model_folder(root_ / "model");
  }
  void TearDown() override { fs::remove_all(root_); }

  // `fitgrad train` with the run's common flags and `flags`: its exit status and its output.
  std::pair<int, std::string> train(const std::string& out, const std::string& flags) {
    const fs::path log = root_ / (out + ".log");
    const std::string command =
        std::string(FITGRAD_CLI) + " train --model " + model_ + " --output_dir " +
        (root_ / out).string() +
        " --objective grpo --lora_r 4 --per_device_train_batch_size 4 "
        "--gradient_accumulation_steps 2 --max_completion_length 8 --logging_steps 1 "
        "--progress plain " +
        flags + " > " + log.string() + " 2>&1";
    const int status = std::system(command.c_str());
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text.str()};
  }
  std::string task() const {
    return " --data " + std::string(FITGRAD_SOURCE_DIR) + "/data/tasks/arithmetic/train.jsonl";
  }
  // A reward program (sh): its first `ok_calls` calls answer 1 a line, the next ones fail as
  // `mode` says; the calls are counted in a file that starts at `done`.
  std::string failing_reward(const std::string& mode, int done) {
    const fs::path script = root_ / "reward.sh", count = root_ / ("count_" + mode);
    std::ofstream(count) << done << "\n";
    std::ofstream(script) << R"(n=$(cat "$1"); n=$((n + 1)); echo $n > "$1"
if [ "$n" -le 2 ]; then while read -r line; do echo 1; done; exit 0; fi
case "$2" in
  word) i=0; while read -r line; do i=$((i + 1)); [ $i -eq 2 ] && echo abc || echo 1; done ;;
  exit) cat > /dev/null; echo "no model to score with" >&2; exit 3 ;;
  short) read -r line; echo 1 ;;
  sleep) exec sleep 30 ;;
esac
)";
    return "'sh " + script.string() + " " + count.string() + " " + mode + "'";
  }

  fs::path root_;
  std::string model_;
};

TEST_F(GrpoCli, TrainsAndWritesRewardMetricsAndSamples) {
  const auto [code, output] =
      train("run", task() +
                       " --reward_funcs exact_match:answer,length_penalty:6 "
                       "--reward_weights 1,0.5 --max_steps 2 --save_steps 0");
  ASSERT_EQ(code, 0) << output;
  std::ifstream metrics(root_ / "run" / "metrics.jsonl");
  int rows = 0;
  for (std::string line; std::getline(metrics, line); ++rows) {
    const nlohmann::json r = nlohmann::json::parse(line);
    for (const char* key :
         {"loss", "reward", "reward_std", "rewards/exact_match/mean", "rewards/length_penalty/mean",
          "completions/mean_length", "clip_ratio/region_mean", "tokens_per_second"})
      EXPECT_TRUE(r.contains(key)) << key << " in " << line;
  }
  EXPECT_EQ(rows, 2);
  std::ifstream samples(root_ / "run" / "samples.jsonl");
  std::string first;
  ASSERT_TRUE(std::getline(samples, first));
  const nlohmann::json s = nlohmann::json::parse(first);
  EXPECT_EQ(s.at("step"), 1);
  EXPECT_TRUE(s.contains("prompt") && s.contains("completion") && s.contains("reward"));
  EXPECT_TRUE(fs::exists(root_ / "run" / "checkpoint-2" / "adapter_model.safetensors"));
}

TEST_F(GrpoCli, AFailingRewardProgramStopsTheRunAndKeepsItsCheckpoint) {
  // Steps 1 and 2 are scored, checkpoint-2 saved; step 3's program answers 'abc' on line 2.
  const std::string word = failing_reward("word", 0);
  const auto [code, output] =
      train("run", task() + " --reward_command " + word + " --max_steps 4 --save_steps 2");
  EXPECT_NE(code, 0) << output;
  EXPECT_NE(output.find("[reward_command 'sh "), std::string::npos) << output;
  EXPECT_NE(output.find("line 2 of its output, 'abc', is not a finite number"), std::string::npos)
      << output;
  EXPECT_NE(output.find("step 3 stopped before it trained; the last checkpoint, checkpoint-2, "
                        "stands"),
            std::string::npos)
      << output;
  EXPECT_TRUE(fs::exists(root_ / "run" / "checkpoint-2" / "adapter_model.safetensors"));
  EXPECT_FALSE(fs::exists(root_ / "run" / "checkpoint-3"));
  // Fixed (its count starts over), the program lets the run resume and finish.
  const auto [again, resumed] =
      train("run", task() + " --reward_command " + failing_reward("word", 0) +
                       " --max_steps 4 --save_steps 2 "
                       "--resume_from_checkpoint last");
  EXPECT_EQ(again, 0) << resumed;
  EXPECT_NE(resumed.find("resumed from"), std::string::npos) << resumed;
  EXPECT_TRUE(fs::exists(root_ / "run" / "checkpoint-4" / "adapter_model.safetensors"));

  // The other failures, at the first step.
  const std::pair<const char*, const char*> failures[] = {
      {"exit", "exited with status 3"},
      {"short", "answered 1 lines for 8 completions"},
      {"sleep", "gave no answer for 8 completions within 1 s (--reward_timeout)"}};
  for (const auto& [mode, message] : failures) {
    const auto [status, text] =
        train(std::string("fail_") + mode, task() + " --reward_command " + failing_reward(mode, 2) +
                                               " --reward_timeout 1 --max_steps 2");
    EXPECT_NE(status, 0) << text;
    EXPECT_NE(text.find(message), std::string::npos) << mode << ": " << text;
    if (std::string(mode) == "exit") {  // the end of its stderr
      EXPECT_NE(text.find("no model to score with"), std::string::npos) << text;
    }
    EXPECT_NE(text.find("[reward_command 'sh "), std::string::npos) << text;
    EXPECT_NE(text.find("step 1 stopped before it trained; no checkpoint was saved yet"),
              std::string::npos)
        << text;
  }
}

TEST_F(GrpoCli, BadFlagsAndDataAreRefusedByName) {
  const fs::path text = root_ / "corpus.txt", sft = root_ / "sft.jsonl",
                 pc = root_ / "prompt_completion.jsonl";
  std::ofstream(text) << "It is a truth universally acknowledged.\n";
  std::ofstream(sft) << R"({"messages": [{"role": "user", "content": "hi"}, )"
                     << R"({"role": "assistant", "content": "hello"}]})"
                     << "\n";
  std::ofstream(pc) << R"({"prompt": "2+2=", "completion": "4"})"
                    << "\n";
  const std::string reward = " --reward_funcs exact_match:answer --max_steps 1";
  const std::pair<std::string, std::string> cases[] = {
      {task() + reward + " --num_generations 1", "a group needs at least 2"},
      {task() + reward + " --num_generations 3",
       "--num_generations 3 does not divide the 8 completions of a step"},
      {task() + reward + " --generation_batch_size 6",
       "--generation_batch_size 6 must be a multiple of --num_generations 8"},
      {task() + reward + " --reward_weights 1,2",
       "--reward_weights has 2 weights and there are 1 rewards"},
      {task() + reward + " --epsilon_high x", "--epsilon_high 'x': not a finite number"},
      {task() + reward + " --loss_type sigmoid", "is none of grpo, bnpo, dr_grpo, dapo"},
      {task() + reward + " --scale_rewards sometimes", "sometimes not in"},
      {task() + " --max_steps 1", "no reward: give --reward_funcs"},
      {task() + " --reward_funcs exact_match:answer,sarcasm --max_steps 1",
       "unknown reward function 'sarcasm'"},
      {" --data " + text.string() + reward, "--objective grpo reads prompt records"},
      {" --data " + sft.string() + reward, "has no \"prompt\""},
      {" --data " + pc.string() + reward, "that is an SFT or preference record"},
      {task() + reward + " --eval_data " + sft.string(), "--eval_data lays out or evaluates"},
  };
  for (const auto& [flags, message] : cases) {
    const auto [code, output] = train("bad", flags);
    EXPECT_NE(code, 0) << flags;
    EXPECT_NE(output.find(message), std::string::npos) << flags << "\n" << output;
  }
  // GRPO's flags with another objective, and --beta 0 where the objective needs it positive.
  const std::string sft_run = std::string(FITGRAD_CLI) + " train --model " + model_ +
                              " --output_dir " + (root_ / "sft").string() + " --data " +
                              sft.string() + " --max_steps 1 ";
  const std::pair<std::string, std::string> others[] = {
      {"--num_generations 4",
       "--num_generations is --objective grpo's; --objective sft does "
       "not read it"},
      {"--objective dpo --beta 0", "--beta 0: --objective dpo needs a positive beta"},
  };
  for (const auto& [flags, message] : others) {
    const fs::path log = root_ / "other.log";
    const std::string command = sft_run + flags + " > " + log.string() + " 2>&1";
    EXPECT_NE(std::system(command.c_str()), 0) << flags;
    std::ifstream in(log);
    std::stringstream output;
    output << in.rdbuf();
    EXPECT_NE(output.str().find(message), std::string::npos) << flags << "\n" << output.str();
  }
}

}  // namespace
}  // namespace fitgrad::apps
