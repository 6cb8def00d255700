// Data-parallel training end to end, with the built `fitgrad` binary (FITGRAD_CLI): `fitgrad
// launch` starts 2 and 3 cpu ranks over Gloo on loopback, and their runs are compared with one
// process training the same global batch (Note [DDP buckets] in dist/ddp.h); the launcher's
// exit codes and environment; and which files rank 0 alone writes (the faults and the launcher
// are ddp_faults_test.cpp's). Every test works in its own fresh directory under /tmp.
//
// Note [DDP tolerance]
// N ranks with micro-batches of B rows and one process with N·B rows compute the same
// gradient in a different order: each rank's GEMMs reduce over B·T rows and its loss is a
// mean over B·T tokens, then N such f32 averages are averaged, where one process reduces
// over N·B·T rows at once. Each sum of k f32 terms carries a relative error up to about
// k·2^-24 (in practice sqrt(k)·2^-24), here k <= 192 rows and tokens, so the gradients
// agree to about 1e-6 relative, and the first step's loss (before any update) to about
// 1e-6. AdamW's update m/(sqrt(v) + eps) divides by the gradient's own size, so the
// difference carries into the weights at the same relative size and grows slowly over the
// steps. The losses of 4 steps are required to agree to 1e-4 relative (and the logged
// gradient norms, computed from the reduced gradients, to 1e-3): a hundred times the
// expected error, and far below what a wrong average (a sum instead of a mean: a factor N in
// the update of plain SGD, a 2x different loss drop here), a wrong shard (another batch:
// losses differing in the second decimal) or a missing reduction would give. Observed on
// llama-tiny: 2 ranks, 4 steps: the losses equal to the last printed digit, the gradient
// norms within 2e-8 relative; 3 ranks with 2 accumulation steps: losses within 1e-7 relative.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/apps/ddp_helpers.h"
#include "tests/train/sft_model_folder.h"

namespace {

using namespace fitgrad::ddp_test;

void expect_same_trajectory(const fs::path& single, const fs::path& ddp, size_t steps) {
  const auto a = losses(single), b = losses(ddp);
  ASSERT_EQ(a.size(), steps);
  ASSERT_EQ(b.size(), steps);
  for (size_t s = 0; s < steps; ++s) {
    // Note [DDP tolerance]
    EXPECT_NEAR(b[s].first, a[s].first, 1e-4 * std::abs(a[s].first)) << "step " << s + 1;
    EXPECT_NEAR(b[s].second, a[s].second, 1e-3 * std::abs(a[s].second)) << "step " << s + 1;
  }
  // Not vacuous: training moved the loss.
  EXPECT_NE(a.front().first, a.back().first);
}

class DdpTrain : public ::testing::TestWithParam<int> {};

TEST_P(DdpTrain, RanksEqualOneProcessWithTheGlobalBatch) {
  const int world = GetParam();
  const fs::path dir = fresh_dir("ddp_equal_" + std::to_string(world));
  const fs::path data = write_corpus(dir);
  const int64_t per_rank = 2;
  ASSERT_EQ(shell(kCli + " train " + train_flags(data, per_rank * world, 1, 4) + " --output_dir " +
                  (dir / "single").string() + " > " + (dir / "single.log").string() + " 2>&1"),
            0)
      << read_text(dir / "single.log");
  ASSERT_EQ(shell(kCli + " launch --nproc_per_node " + std::to_string(world) + " train " +
                  train_flags(data, per_rank, 1, 4) + " --output_dir " + (dir / "ddp").string() +
                  " > " + (dir / "ddp.log").string() + " 2>&1"),
            0)
      << read_text(dir / "ddp.log");
  expect_same_trajectory(dir / "single", dir / "ddp", 4);
  // Rank 0 alone writes the run's files; every rank its own ledger.
  EXPECT_TRUE(fs::exists(dir / "ddp" / "checkpoint-4" / "model.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "ddp" / "loss_curve.svg"));
  EXPECT_TRUE(fs::exists(dir / "ddp" / "memory.json"));
  for (int k = 0; k < world; ++k) {
    const fs::path ledger = dir / "ddp" / ("memory.rank" + std::to_string(k) + ".json");
    ASSERT_TRUE(fs::exists(ledger)) << ledger;
    const json j = json::parse(read_text(ledger));
    EXPECT_GT(j["by_category"]["collective"]["peak"].get<int64_t>(), 0) << ledger;
  }
  EXPECT_FALSE(fs::exists(dir / "ddp" / ("memory.rank" + std::to_string(world) + ".json")));
  fs::remove_all(dir);
}

// `fitgrad train <single>` into dir/single and `fitgrad launch --nproc_per_node 2 train <rank>`
// into dir/ddp, each logging into dir/<name>.log.
void run_single_and_two_ranks(const fs::path& dir, const std::string& single,
                              const std::string& rank) {
  ASSERT_EQ(shell(kCli + " train " + single + " --output_dir " + (dir / "single").string() + " > " +
                  (dir / "single.log").string() + " 2>&1"),
            0)
      << read_text(dir / "single.log");
  ASSERT_EQ(shell(kCli + " launch --nproc_per_node 2 train " + rank + " --output_dir " +
                  (dir / "ddp").string() + " > " + (dir / "ddp.log").string() + " 2>&1"),
            0)
      << read_text(dir / "ddp.log");
}

// Two launchers as two hosts of 2 ranks each (Note [Launching on several hosts]), meeting in
// a store both reach, train as one launcher of 4 ranks does.
TEST(DdpTwoHosts, TwoLaunchersOfTwoRanksEqualOneOfFour) {
  const fs::path dir = fresh_dir("ddp_two_hosts");
  const fs::path data = write_corpus(dir);
  fs::create_directories(dir / "store");
  const std::string flags = train_flags(data, 2, 1, 3);
  ASSERT_EQ(shell(kCli + " launch --nproc_per_node 4 train " + flags + " --output_dir " +
                  (dir / "one").string() + " > " + (dir / "one.log").string() + " 2>&1"),
            0)
      << read_text(dir / "one.log");
  const std::string env =
      "FITGRAD_STORE=file:" + (dir / "store").string() + " FITGRAD_GLOO_HOSTNAME=127.0.0.1 ";
  auto host = [&](int k) {
    return env + kCli + " launch --nnodes 2 --node_rank " + std::to_string(k) +
           " --nproc_per_node 2 train " + flags + " --output_dir " + (dir / "two").string() +
           " > " + (dir / ("host" + std::to_string(k) + ".log")).string() + " 2>&1";
  };
  ASSERT_EQ(shell("(" + host(1) + ") & other=$!; " + host(0) +
                  "; mine=$?; wait $other; exit $((mine | $?))"),
            0)
      << read_text(dir / "host0.log") << read_text(dir / "host1.log");
  expect_same_trajectory(dir / "one", dir / "two", 3);
  fs::remove_all(dir);
}

// Int8 weights under data parallelism (issue 43, finding 6): the codes' floating gradients
// are averaged in f32 buckets, and the scales and zeros, which never train, are broadcast at
// the start and reduced never; 2 ranks follow one process of the global batch.
TEST(DdpTrainInt8, RanksEqualOneProcessWithTheGlobalBatch) {
  const fs::path dir = fresh_dir("ddp_int8");
  const fs::path data = write_corpus(dir);
  run_single_and_two_ranks(dir, train_flags(data, 4, 1, 3) + " --weights_int8",
                           train_flags(data, 2, 1, 3) + " --weights_int8");
  expect_same_trajectory(dir / "single", dir / "ddp", 3);
  fs::remove_all(dir);
}

// Instruction data whose examples train 1 to 60 tokens: each rank weighs its micro-batches by
// the job's trained targets (Note [Loss over trained targets]), so 2 ranks of batch 1 follow
// one process of batch 2, the mean over the global batch's trained targets. (The mean of the
// ranks' means differs in the second decimal here.)
TEST(DdpTrainSft, RanksWeighTheJobsTrainedTargetsAsOneProcess) {
  const fs::path dir = fresh_dir("ddp_sft");
  const std::string model = fitgrad::testing::write_sft_model_folder(dir);
  {
    std::ofstream data(dir / "chats.jsonl");
    for (int i = 0; i < 10; ++i) {
      std::string answer;
      for (int w = 0; w < (i % 2 == 0 ? 1 : 25 + 3 * i); ++w) answer += (w ? " word" : "yes");
      data << json{{"messages",
                    {{{"role", "user"}, {"content", "question " + std::to_string(i)}},
                     {{"role", "assistant"}, {"content", answer}}}}}
                  .dump()
           << "\n";
    }
  }
  const auto flags = [&](int64_t batch) {
    return "--model " + model + " --data " + (dir / "chats.jsonl").string() +
           " --seq_len 128 --packing none --data_order sequential --per_device_train_batch_size " +
           std::to_string(batch) +
           " --max_steps 4 --learning_rate 1e-2 --logging_steps 1 --eval_strategy no "
           "--save_strategy no --progress plain --ddp_bucket_cap_mb 1";
  };
  ASSERT_NO_FATAL_FAILURE(run_single_and_two_ranks(dir, flags(2), flags(1)));
  expect_same_trajectory(dir / "single", dir / "ddp", 4);
  fs::remove_all(dir);
}

// DPO with LoRA: 2 ranks of 1 pair follow one process of 2 pairs (the mean over the global
// batch's pairs), and the logged rewards are the global batch's (summed over the ranks).
TEST(DdpTrainPreference, RanksEqualOneProcessAndLogTheGlobalRewards) {
  const fs::path dir = fresh_dir("ddp_dpo");
  const std::string model = fitgrad::testing::write_sft_model_folder(dir);
  {
    std::ofstream data(dir / "pairs.jsonl");
    for (int i = 0; i < 10; ++i) {
      std::string chosen, rejected;
      for (int w = 0; w < 2 + i; ++w) chosen += " yes";
      for (int w = 0; w < 12 - i; ++w) rejected += " no";
      data << json{{"prompt", "Question " + std::to_string(i) + ":"},
                   {"chosen", chosen},
                   {"rejected", rejected}}
                  .dump()
           << "\n";
    }
  }
  const auto flags = [&](int64_t batch) {
    return "--model " + model + " --data " + (dir / "pairs.jsonl").string() +
           " --objective dpo --lora_r 4 --seq_len 64 --data_order sequential "
           "--per_device_train_batch_size " +
           std::to_string(batch) +
           " --max_steps 3 --learning_rate 1e-2 --logging_steps 1 --eval_strategy no "
           "--save_strategy no --progress plain";
  };
  ASSERT_NO_FATAL_FAILURE(run_single_and_two_ranks(dir, flags(2), flags(1)));
  expect_same_trajectory(dir / "single", dir / "ddp", 3);
  const auto rows = [](const fs::path& run) {
    std::vector<json> out;
    std::ifstream in(run / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
    return out;
  };
  const std::vector<json> a = rows(dir / "single"), b = rows(dir / "ddp");
  ASSERT_EQ(a.size(), b.size());
  for (size_t s = 1; s < a.size(); ++s)
    for (const char* key : {"rewards/margins", "rewards/chosen", "logps/rejected"})
      EXPECT_NEAR(b[s].at(key).get<double>(), a[s].at(key).get<double>(),
                  1e-3 * std::max(1e-3, std::abs(a[s].at(key).get<double>())))
          << key << " at step " << s + 1;
  fs::remove_all(dir);
}

TEST_P(DdpTrain, AccumulationReducesOnTheLastMicroBatchAndEqualsOneProcess) {
  const int world = GetParam();
  const fs::path dir = fresh_dir("ddp_accum_" + std::to_string(world));
  const fs::path data = write_corpus(dir);
  ASSERT_EQ(shell(kCli + " train " + train_flags(data, 2 * world, 2, 3) + " --output_dir " +
                  (dir / "single").string() + " > " + (dir / "single.log").string() + " 2>&1"),
            0)
      << read_text(dir / "single.log");
  ASSERT_EQ(shell(kCli + " launch --nproc_per_node " + std::to_string(world) + " train " +
                  train_flags(data, 2, 2, 3) + " --output_dir " + (dir / "ddp").string() + " > " +
                  (dir / "ddp.log").string() + " 2>&1"),
            0)
      << read_text(dir / "ddp.log");
  expect_same_trajectory(dir / "single", dir / "ddp", 3);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Ranks, DdpTrain, ::testing::Values(2, 3));

// A ledger category's peak bytes in a memory record.
int64_t category_peak(const fs::path& record, const std::string& category) {
  return json::parse(read_text(record))["by_category"][category]["peak"].get<int64_t>();
}

struct ZeroCase {
  int stage, world;
  int64_t accum;
  std::string optim;
};

class ZeroTrain : public ::testing::TestWithParam<ZeroCase> {};

// Note [ZeRO by whole parameters]: ZeRO's ranks follow one process with the global batch
// (the tolerance of Note [DDP tolerance]: the update is the same arithmetic on the same
// reduced gradient, only run by the parameter's owner; stage 2's norm adds the ranks' sums
// of squares in another order, a relative 1e-16 change), and their optimizer state adds up
// to the one process's, each rank within one parameter's state (llama-tiny's largest, the
// (256, 64) embedding) of 1/N of it.
TEST_P(ZeroTrain, RanksEqualOneProcessAndShareTheOptimizerState) {
  const ZeroCase c = GetParam();
  const fs::path dir = fresh_dir("zero" + std::to_string(c.stage) + "_" + std::to_string(c.world));
  const fs::path data = write_corpus(dir);
  const std::string optim = " --optim " + c.optim;
  ASSERT_EQ(shell(kCli + " train " + train_flags(data, 2 * c.world, c.accum, 4) + optim +
                  " --output_dir " + (dir / "single").string() + " > " +
                  (dir / "single.log").string() + " 2>&1"),
            0)
      << read_text(dir / "single.log");
  ASSERT_EQ(shell(kCli + " launch --nproc_per_node " + std::to_string(c.world) + " train " +
                  train_flags(data, 2, c.accum, 4) + optim + " --zero_stage " +
                  std::to_string(c.stage) + " --output_dir " + (dir / "zero").string() + " > " +
                  (dir / "zero.log").string() + " 2>&1"),
            0)
      << read_text(dir / "zero.log");
  expect_same_trajectory(dir / "single", dir / "zero", 4);
  const int64_t whole = category_peak(dir / "single" / "memory.json", "optimizer_state");
  // One parameter's state at most, the (256, 64) embedding's: its factors (Adafactor), its
  // two u8 moments and their absmax per 256 values (8-bit Adam), else two f32 moments (APOLLO
  // keeps AdamW on the embedding and the head).
  const int64_t largest = c.optim == "adafactor"    ? 4 * (256 + 64)
                          : c.optim == "adamw_8bit" ? 2 * (256 * 64 + 4 * 64)
                                                    : 2 * 4 * 256 * 64;
  int64_t sum = 0;
  for (int k = 0; k < c.world; ++k) {
    const int64_t mine = category_peak(dir / "zero" / ("memory.rank" + std::to_string(k) + ".json"),
                                       "optimizer_state");
    EXPECT_LE(mine, whole / c.world + largest) << "rank " << k;
    EXPECT_GE(mine, whole / c.world - largest) << "rank " << k;
    sum += mine;
  }
  EXPECT_EQ(sum, whole);
  // The checkpoint is one process's: the same tensor names and sizes as the single run's.
  EXPECT_EQ(fs::file_size(dir / "zero" / "checkpoint-4" / "optimizer.safetensors"),
            fs::file_size(dir / "single" / "checkpoint-4" / "optimizer.safetensors"));
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Stages, ZeroTrain,
                         ::testing::Values(ZeroCase{1, 2, 1, "adamw_torch"},
                                           ZeroCase{2, 3, 2, "adamw_torch"},
                                           ZeroCase{2, 2, 1, "adafactor"},
                                           ZeroCase{1, 2, 1, "adamw_8bit"},
                                           ZeroCase{2, 3, 1, "apollo_mini"}),
                         [](const auto& info) {
                           return "stage" + std::to_string(info.param.stage) + "_ranks" +
                                  std::to_string(info.param.world) + "_" + info.param.optim;
                         });

// Checkpoints are rank-independent: a ZeRO-1 run of 2 ranks x 3 rows saves at step 2; a job
// of 3 ranks x 2 rows (the same global batch) resumed from that checkpoint trains steps 3 and
// 4 as the uninterrupted 2-rank run did (Note [DDP tolerance]).
TEST(ZeroResume, ACheckpointOfTwoRanksResumesOnThree) {
  const fs::path dir = fresh_dir("zero_resume");
  const fs::path data = write_corpus(dir);
  const std::string common = " --zero_stage 1 --save_steps 2";
  ASSERT_EQ(shell(kCli + " launch --nproc_per_node 2 train " + train_flags(data, 3, 1, 4) + common +
                  " --output_dir " + (dir / "whole").string() + " > " +
                  (dir / "whole.log").string() + " 2>&1"),
            0)
      << read_text(dir / "whole.log");
  ASSERT_EQ(shell(kCli + " launch --nproc_per_node 3 train " + train_flags(data, 2, 1, 4) + common +
                  " --output_dir " + (dir / "resumed").string() + " --resume_from_checkpoint " +
                  (dir / "whole" / "checkpoint-2").string() + " > " +
                  (dir / "resumed.log").string() + " 2>&1"),
            0)
      << read_text(dir / "resumed.log");
  expect_same_trajectory(dir / "whole", dir / "resumed", 4);
  // Another global batch is refused, naming both.
  EXPECT_NE(shell(kCli + " launch --nproc_per_node 3 train " + train_flags(data, 3, 1, 4) + common +
                  " --output_dir " + (dir / "other").string() + " --resume_from_checkpoint " +
                  (dir / "whole" / "checkpoint-2").string() + " > " + (dir / "other.log").string() +
                  " 2>&1"),
            0);
  EXPECT_NE(read_text(dir / "other.log")
                .find("the global batch was 6 there (2 rank(s) x --per_device_train_batch_size 3) "
                      "and is 9 now (3 x 3)"),
            std::string::npos)
      << read_text(dir / "other.log");
  fs::remove_all(dir);
}

// Note [Planning one rank]: `memplan --world_size 2 --rank k` plans what rank k of the real
// 2-rank job does: the same allocator events in the same order, so the same peak in total and
// per category (its share of the optimizer state, its gradients, DDP's buckets), for DDP and
// both ZeRO stages. The ranks' planned
// optimizer state adds up to one process's plan. Both run one thread per rank, as the
// launcher gives 2 ranks on 2 cores (flash attention's workspace rows follow the threads).
TEST(ZeroPlan, EachRanksPlanEqualsItsLedger) {
  const fs::path dir = fresh_dir("zero_plan");
  const fs::path data = write_corpus(dir);
  auto peaks = [](const fs::path& record) {
    const json j = json::parse(read_text(record));
    std::map<std::string, int64_t> out{{"all", j["peak"]["allocated"].get<int64_t>()}};
    for (const char* c : {"parameter", "gradient", "optimizer_state", "collective", "activation"})
      out[c] = j["by_category"][c]["peak"].get<int64_t>();
    return out;
  };
  // Every allocator event in order: its kind, bytes requested, category and label.
  auto events = [](const fs::path& record) {
    const json j = json::parse(read_text(record));
    EXPECT_EQ(j["trace"]["dropped"].get<int64_t>(), 0) << record;
    std::vector<std::string> out;
    auto field = [](const json& e, const char* key) {
      return e.contains(key) && !e[key].is_null() ? e[key].dump() : std::string("-");
    };
    for (const json& e : j["trace"]["events"])
      out.push_back(field(e, "kind") + " " + field(e, "requested") + " " + field(e, "category") +
                    " " + field(e, "label"));
    return out;
  };
  for (int stage : {0, 1, 2}) {
    const std::string flags =
        train_flags(data, 2, 1, 3) + " --save_strategy no --zero_stage " + std::to_string(stage);
    const fs::path job = dir / ("job" + std::to_string(stage));
    ASSERT_EQ(shell("OMP_NUM_THREADS=1 " + kCli + " launch --nproc_per_node 2 train " + flags +
                    " --output_dir " + job.string() + " > " + job.string() + ".log 2>&1"),
              0)
        << read_text(job.string() + ".log");
    int64_t state = 0;
    for (int k = 0; k < 2; ++k) {
      const fs::path plan = dir / ("plan" + std::to_string(stage) + "_" + std::to_string(k));
      ASSERT_EQ(shell("OMP_NUM_THREADS=1 " + kCli + " memplan --device cpu " + flags +
                      " --world_size 2 --rank " + std::to_string(k) + " --output_dir " +
                      plan.string() + " > " + plan.string() + ".log 2>&1"),
                0)
          << read_text(plan.string() + ".log");
      EXPECT_NE(
          read_text(plan.string() + ".log").find("planned: rank " + std::to_string(k) + " of 2"),
          std::string::npos);
      const auto planned = peaks(plan / "memory.json");
      const fs::path ledger = job / ("memory.rank" + std::to_string(k) + ".json");
      EXPECT_EQ(planned, peaks(ledger)) << "stage " << stage << " rank " << k;
      EXPECT_EQ(events(plan / "memory.json"), events(ledger)) << "stage " << stage << " rank " << k;
      EXPECT_GT(planned.at("collective"), 0);  // DDP's buckets
      state += planned.at("optimizer_state");
    }
    const fs::path one = dir / ("one" + std::to_string(stage));
    ASSERT_EQ(
        shell("OMP_NUM_THREADS=1 " + kCli + " memplan --device cpu " + train_flags(data, 2, 1, 3) +
              " --output_dir " + one.string() + " > " + one.string() + ".log 2>&1"),
        0)
        << read_text(one.string() + ".log");
    const int64_t whole = peaks(one / "memory.json").at("optimizer_state");
    EXPECT_EQ(state, stage == 0 ? 2 * whole : whole) << "stage " << stage;
  }
  fs::remove_all(dir);
}

// The acceptance: two ranks train gpt2-tiny and write one checkpoint, which `fitgrad
// generate` reads.
TEST(DdpTrainGpt2, TwoRanksWriteOneCheckpointThatGenerateReads) {
  const fs::path dir = fresh_dir("ddp_gpt2");
  const fs::path data = write_corpus(dir);
  ASSERT_EQ(
      shell(kCli + " launch --nproc_per_node 2 train --model gpt2-tiny --data " + data.string() +
            " --seq_len 32 --per_device_train_batch_size 2 --max_steps 2 --eval_strategy no "
            "--progress plain --output_dir " +
            (dir / "out").string() + " > " + (dir / "train.log").string() + " 2>&1"),
      0)
      << read_text(dir / "train.log");
  int checkpoints = 0;
  for (const auto& e : fs::directory_iterator(dir / "out"))
    checkpoints += e.path().filename().string().starts_with("checkpoint-");
  EXPECT_EQ(checkpoints, 1);
  ASSERT_EQ(shell(kCli + " generate --model " + (dir / "out" / "checkpoint-2").string() +
                  " --prompt 'ab cd' --max_new_tokens 4 > " + (dir / "gen.log").string() + " 2>&1"),
            0)
      << read_text(dir / "gen.log");
  EXPECT_NE(read_text(dir / "gen.log").find("new tokens: 4"), std::string::npos)
      << read_text(dir / "gen.log");
  fs::remove_all(dir);
}

TEST(ZeroFaults, OneProcessAndInt8WeightsAreRefused) {
  const fs::path dir = fresh_dir("zero_refused");
  const fs::path data = write_corpus(dir);
  EXPECT_EQ(shell(kCli + " train " + train_flags(data, 2, 1, 2) + " --zero_stage 1 --output_dir " +
                  (dir / "one").string() + " > " + (dir / "one.log").string() + " 2>&1"),
            1);
  EXPECT_NE(read_text(dir / "one.log").find("--zero_stage 1 shards across the ranks of a launcher"),
            std::string::npos)
      << read_text(dir / "one.log");
  EXPECT_NE(shell(kCli + " launch --nproc_per_node 2 train " + train_flags(data, 2, 1, 2) +
                  " --zero_stage 2 --weights_int8 --output_dir " + (dir / "int8").string() + " > " +
                  (dir / "int8.log").string() + " 2>&1"),
            0);
  EXPECT_NE(read_text(dir / "int8.log").find("cannot run with --weights_int8"), std::string::npos)
      << read_text(dir / "int8.log");
  fs::remove_all(dir);
}

}  // namespace
