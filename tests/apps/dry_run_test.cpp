// `fitgrad train --device meta` is the real run without its values (Note [Dry run on meta]
// in apps/train/train_run.h): for gpt2-tiny and llama-tiny, each in fp32, --bf16, --fp16,
// --gradient_checkpointing, --gradient_accumulation_steps 2, configured dropout, --optim
// adamw_8bit, adafactor and adafactor_hf, --pure_bf16 --stochastic_rounding and
// --optim_in_backward, QLoRA (--quantize nf4 --lora_r 4), checkpointing in one segment, and
// the fused head with the tiled MLP inside checkpointed blocks,
// a cpu run, a meta run with the same flags, and memplan's plan of them for this machine's
// CPU (apps/memplan/plan.h) write memory.json traces whose events from the run's start
// (kind, size, requested bytes, category, label, in order) and whose peaks allocated and
// reserved are identical; the plan reports those peaks. The dry run reads no data, writes
// no checkpoint and no metrics, and says so.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "apps/memplan/plan.h"
#include "apps/train/trainer.h"
#include "nn/config.h"
#include "tensor/memory/caching_allocator.h"
#include "tests/apps/memory_trace.h"

namespace fitgrad::apps {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

class DryRunTest : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("fitgrad_dry_run_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override {
    if (!std::getenv("FITGRAD_KEEP")) fs::remove_all(root_);
  }

  std::string write_text() {
    std::mt19937 rng(3);
    std::string text;
    for (int i = 0; i < 12000; ++i) text += i % 7 == 6 ? ' ' : char('a' + rng() % 26);
    const fs::path p = root_ / "text.txt";
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }

  fs::path root_;
};

TEST_P(DryRunTest, MetaWritesTheTraceOfTheRealRun) {
  const auto& [model, variant] = GetParam();
  TrainArgs a;
  a.model = model;
  a.data = write_text();
  a.seq_len = 32;
  a.per_device_train_batch_size = 2;
  a.per_device_eval_batch_size = 2;
  a.val_fraction = 0.2;
  a.max_steps = 2;
  a.logging_steps = 1;
  a.eval_steps = 2;
  a.eval_max_batches = 1;
  a.save_strategy = "no";
  a.progress = "plain";
  if (variant == "bf16") a.bf16 = true;
  if (variant == "fp16") a.fp16 = true;
  if (variant == "checkpointing") a.gradient_checkpointing = true;
  if (variant == "one_segment") {
    a.gradient_checkpointing = true;
    a.checkpoint_segments = 1;
  }
  if (variant == "accumulation") a.gradient_accumulation_steps = 2;
  if (variant == "expandable") {  // Note [Expandable segments], with large-pool blocks:
    a.allocator = "expandable";   // logits of 32 x 64 tokens are 2 MiB
    a.seq_len = 64;
    a.per_device_train_batch_size = a.per_device_eval_batch_size = 32;
  }
  if (variant == "row_chunks") {  // Note [Row-chunked head and MLP], inside checkpoints
    a.fused_head_loss = a.tiled_mlp = a.gradient_checkpointing = true;
    a.head_chunk_size = 20;
    a.mlp_tiles = 3;
  }
  if (variant == "adamw_8bit" || variant == "adafactor" || variant == "adafactor_hf")
    a.optim = variant;
  if (variant == "pure_bf16_sr") a.pure_bf16 = a.stochastic_rounding = true;
  if (variant == "qlora") {
    a.quantize = "nf4";
    a.lora_r = 4;
    a.bnb_4bit_use_double_quant = true;
  }
  if (variant == "optim_in_backward") {
    a.optim_in_backward = true;
    a.max_grad_norm = 0;
  }
  if (variant == "dropout") {  // Note [Dropout as configured]: masks and attention dropout
    nn::ModelConfig cfg = nn::preset(model);
    cfg.attn_pdrop = 0.1;
    if (cfg.family == nn::Family::gpt2) cfg.embd_pdrop = cfg.resid_pdrop = 0.1;
    a.model = (root_ / "config.json").string();
    std::ofstream(a.model) << nn::config_to_json(cfg).dump();
  }

  // The CPU run starts as the meta run does, with no live block: a block that an earlier
  // test in this process left live pins its segment, whose free rest the run would use,
  // and the real trace would then lack a segment_alloc that the dry run has.
  ASSERT_EQ(allocator_for(Device::cpu()).stats().allocated_bytes[kAllPools].current, 0)
      << "an earlier test in this process left CPU blocks live";
  TrainArgs cpu = a, meta = a;
  cpu.output_dir = (root_ / "cpu").string();
  meta.output_dir = (root_ / "meta").string();
  meta.device = "meta";
  meta.data.clear();  // a dry run reads no data
  std::ostringstream out, err;
  ASSERT_EQ(run_train(cpu, out, err), 0) << err.str();
  std::ostringstream meta_out, meta_err;
  ASSERT_EQ(run_train(meta, meta_out, meta_err), 0) << meta_err.str();

  const std::string plan_dir = (root_ / "plan").string();
  const Plan plan = plan_training(a, plan_target("cpu", "", ""), plan_dir);
  ASSERT_TRUE(plan.fits) << plan.oom_report;

  const Trace real = read_trace(cpu.output_dir);
  EXPECT_GT(real.events.size(), 100u);
  EXPECT_GT(real.peak_above_start, 0);
  for (const fs::path& dir : {fs::path(meta.output_dir), fs::path(plan_dir)}) {
    const Trace dry = read_trace(dir);
    ASSERT_EQ(dry.events.size(), real.events.size()) << dir;
    for (size_t i = 0; i < real.events.size(); ++i)
      ASSERT_EQ(dry.events[i], real.events[i]) << "event " << i << " after the start in " << dir;
    EXPECT_EQ(dry.peak_above_start, real.peak_above_start) << dir;
    EXPECT_EQ(dry.reserved_peak_above_start, real.reserved_peak_above_start) << dir;
    EXPECT_EQ(dry.peak_events_after_start, real.peak_events_after_start) << dir;
  }
  if (variant == "expandable") {
    const auto maps = std::count_if(real.events.begin(), real.events.end(),
                                    [](const auto& e) { return e.starts_with("\"segment_map\""); });
    EXPECT_GT(maps, 0) << "the expandable run never grew its segment";
  }
  // A plan starts from an empty meta allocator, so its figures are the peaks above the start.
  EXPECT_EQ(plan.peak_allocated, real.peak_above_start);
  EXPECT_EQ(plan.peak_reserved, real.reserved_peak_above_start);

  EXPECT_THAT(meta_out.str(), ::testing::HasSubstr("dry run on meta: no data is read, no losses"));
  for (const char* f :
       {"memory.json", "memory_trace.json", "peak_report.txt", "memory_summary.txt"})
    EXPECT_TRUE(fs::exists(fs::path(meta.output_dir) / f)) << f;
  for (const char* f : {"metrics.jsonl", "loss_curve.svg"})
    EXPECT_FALSE(fs::exists(fs::path(meta.output_dir) / f)) << f;
  for (const auto& entry : fs::directory_iterator(meta.output_dir))
    EXPECT_FALSE(entry.path().filename().string().starts_with("checkpoint-")) << entry.path();
}

INSTANTIATE_TEST_SUITE_P(
    ModelsAndVariants, DryRunTest,
    ::testing::Combine(::testing::Values("gpt2-tiny", "llama-tiny"),
                       ::testing::Values("fp32", "bf16", "checkpointing", "accumulation", "dropout",
                                         "fp16", "adamw_8bit", "adafactor", "adafactor_hf",
                                         "pure_bf16_sr", "optim_in_backward", "qlora",
                                         "one_segment", "row_chunks", "expandable")),
    [](const auto& info) {
      std::string name = std::get<0>(info.param) + "_" + std::get<1>(info.param);
      for (char& c : name)
        if (c == '-') c = '_';
      return name;
    });

}  // namespace
}  // namespace fitgrad::apps
