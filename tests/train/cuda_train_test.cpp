// `fitgrad train --device cuda:0` against the CPU (issue 15), where a GPU is usable: for
// gpt2-tiny and llama-tiny in fp32, bf16, checkpointing, adamw_8bit, adafactor, apollo (rank
// 8) and apollo_mini, pure bf16 with stochastic rounding, QLoRA, --offload_optimizer and
// --offload_activations (the CPU run without them), the cuda run
//   - logs the CPU run's losses within the dtype's tolerance, step by step;
//   - makes exactly the allocations that memplan's plan for this card makes (the plan's
//     profile is the card's: profile_for(cuda:0)), event for event, with the same peaks
//     allocated and reserved: the "memory equals the plan" target, the CUDA context aside;
//   - resumes bitwise: 2 steps, a checkpoint, 2 more equal 4 steps straight.
// Without a GPU every test skips, saying so.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "apps/memplan/plan.h"
#include "tensor/backend/profile.h"
#include "tensor/device_registry.h"
#include "tests/card.h"
#include "tests/train/memory_trace.h"
#include "train/trainer.h"

namespace fitgrad::apps {

using train::run_train;
using train::TrainArgs;
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

std::vector<double> losses(const fs::path& dir) {
  std::vector<double> out;
  std::ifstream in(dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line);
    if (j.contains("loss")) out.push_back(j.at("loss").get<double>());
  }
  return out;
}

class CudaTrain : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  void SetUp() override {
    FG_SKIP_WITHOUT_CARD();
    root_ = fs::temp_directory_path() / ("fitgrad_cuda_train_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // The variant's arguments on `device` ("cpu", "cuda"; --offload_optimizer on cuda only).
  TrainArgs args(const std::string& device = "cuda") {
    std::mt19937 rng(5);
    std::string text;
    for (int i = 0; i < 12000; ++i) text += i % 7 == 6 ? ' ' : char('a' + rng() % 26);
    const fs::path data = root_ / "text.txt";
    std::ofstream(data, std::ios::binary) << text;
    const auto& [model, variant] = GetParam();
    TrainArgs a;
    a.model = model;
    a.data = data.string();
    a.seq_len = 32;
    a.per_device_train_batch_size = 2;
    a.max_steps = 4;
    a.logging_steps = 1;
    a.eval_strategy = "no";
    a.save_strategy = "no";
    a.progress = "plain";
    if (variant == "bf16") a.bf16 = true;
    if (variant == "checkpointing") a.gradient_checkpointing = true;
    if (variant == "adamw_8bit" || variant == "adafactor" || variant == "apollo_mini")
      a.optim = variant;
    if (variant == "apollo") {  // projections redrawn at steps 1 and 3
      a.optim = "apollo";
      a.optim_args = "rank=8,update_proj_gap=2";
    }
    if (variant == "pure_bf16_sr") a.pure_bf16 = a.stochastic_rounding = true;
    if (variant == "qlora") {
      a.quantize = "nf4";
      a.lora_r = 4;
    }
    a.offload_optimizer = variant == "offload" && device == "cuda";
    if (variant == "offload_activations") {
      a.gradient_checkpointing = true;
      a.offload_activations = device == "cuda";
    }
    return a;
  }
  double tolerance() const {
    const std::string& variant = std::get<1>(GetParam());
    return variant == "fp32" || variant == "checkpointing" || variant == "adafactor" ||
                   variant == "adamw_8bit" || variant == "apollo" || variant == "apollo_mini" ||
                   variant == "offload" || variant == "offload_activations"
               ? 2e-3
               : 3e-2;
  }

  fs::path root_;
};

TEST_P(CudaTrain, LogsTheCpuLossesAndAllocatesAsItsPlan) {
  TrainArgs cpu = args("cpu"), gpu = args();
  cpu.output_dir = (root_ / "cpu").string();
  gpu.output_dir = (root_ / "cuda").string();
  gpu.device = "cuda:0";
  std::ostringstream out, err;
  ASSERT_EQ(run_train(cpu, out, err), 0) << err.str();
  ASSERT_EQ(run_train(gpu, out, err), 0) << err.str();
  const std::vector<double> want = losses(cpu.output_dir), got = losses(gpu.output_dir);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tolerance() * std::max(1.0, std::fabs(want[i]))) << "step " << i;

  PlanTarget card;
  card.name = "this card";
  card.profile = backend::profile_for(Device::cuda(0));
  card.capacity = int64_t(1) << 50;
  const fs::path plan_dir = root_ / "plan";
  TrainArgs planned = args();
  const Plan plan = plan_training(planned, card, plan_dir.string());
  ASSERT_TRUE(plan.fits) << plan.oom_report;
  const Trace real = read_trace(gpu.output_dir), dry = read_trace(plan_dir);
  ASSERT_EQ(dry.events.size(), real.events.size());
  for (size_t i = 0; i < real.events.size(); ++i)
    ASSERT_EQ(dry.events[i], real.events[i]) << "event " << i << " after the start";
  EXPECT_EQ(plan.peak_allocated, real.peak_above_start);
  EXPECT_EQ(plan.peak_reserved, real.reserved_peak_above_start);
}

TEST_P(CudaTrain, ResumesBitwise) {
  TrainArgs straight = args(), first = args();
  straight.device = first.device = "cuda:0";
  straight.output_dir = (root_ / "straight").string();
  first.output_dir = (root_ / "resumed").string();
  first.max_steps = 2;
  first.save_strategy = "steps";
  first.save_steps = 2;
  std::ostringstream out, err;
  ASSERT_EQ(run_train(straight, out, err), 0) << err.str();
  ASSERT_EQ(run_train(first, out, err), 0) << err.str();
  TrainArgs second = first;
  second.max_steps = 4;
  second.resume_from_checkpoint = (fs::path(first.output_dir) / "checkpoint-2").string();
  ASSERT_EQ(run_train(second, out, err), 0) << err.str();
  const std::vector<double> a = losses(straight.output_dir), b = losses(second.output_dir);
  ASSERT_EQ(a.size(), 4u);
  ASSERT_GE(b.size(), 2u);
  EXPECT_EQ(a[2], b[b.size() - 2]);
  EXPECT_EQ(a[3], b[b.size() - 1]);
}

INSTANTIATE_TEST_SUITE_P(
    ModelsAndVariants, CudaTrain,
    ::testing::Combine(::testing::Values("gpt2-tiny", "llama-tiny"),
                       ::testing::Values("fp32", "bf16", "checkpointing", "adamw_8bit", "adafactor",
                                         "apollo", "apollo_mini", "pure_bf16_sr", "qlora",
                                         "offload", "offload_activations")),
    [](const auto& info) {
      std::string name = std::get<0>(info.param) + "_" + std::get<1>(info.param);
      for (char& c : name)
        if (c == '-') c = '_';
      return name;
    });

}  // namespace
}  // namespace fitgrad::apps
