// `fitgrad memplan` (apps/memplan/): the targets, the cost model against the published
// arithmetic of a transformer step, the fit search's pruning checked by planning what it
// skipped, the bisection for the longest sequence checked at its edge, and the CLI's
// errors. The plans' exactness against real runs is tests/apps/dry_run_test.cpp's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "apps/memplan/cost_model.h"
#include "apps/memplan/memplan_command.h"
#include "apps/memplan/search.h"
#include "apps/memplan/targets.h"
#include "apps/train/train_options.h"
#include "nn/config.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::apps {

using train::validate;

using train::TrainArgs;
namespace {

// A 4-block Llama of 12M parameters, large enough that its settings differ by whole
// segments of the allocator, as a config.json under the test's temporary directory.
std::string small_llama() {
  nn::ModelConfig c = nn::preset("llama-tiny");
  c.hidden_size = 512;
  c.intermediate_size = 1376;
  c.num_layers = 4;
  c.num_heads = 8;
  c.num_kv_heads = 4;
  c.max_position_embeddings = 256;
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("fitgrad_memplan_" + std::to_string(::getpid()) + ".json"))
                               .string();
  std::ofstream(path) << nn::config_to_json(c).dump();
  return path;
}

TrainArgs tiny_args() {
  TrainArgs a;
  a.model = "llama-tiny";
  a.seq_len = 64;
  a.per_device_train_batch_size = 4;
  a.max_steps = 2;
  a.eval_strategy = "no";
  return a;
}

TEST(MemplanTarget, CardsAndSizes) {
  const PlanTarget card = plan_target("cuda", "rtx4090", "");
  EXPECT_EQ(card.capacity, int64_t(24564 - 512) << 20);
  EXPECT_EQ(card.profile, backend::cuda_profile(128, int64_t(4) << 20));
  const PlanTarget hopper = plan_target("cuda", "", "1GiB");  // h100 by default
  EXPECT_EQ(hopper.capacity, int64_t(81559 - 1024) << 20);
  EXPECT_EQ(hopper.profile.gemm_workspace_bytes, int64_t(32) << 20);
  const PlanTarget bare = plan_target("cuda", "24GiB", "");
  EXPECT_EQ(bare.capacity, (int64_t(24) << 30) - (int64_t(512) << 20));
  const PlanTarget cpu = plan_target("cpu", "3GiB", "");
  EXPECT_EQ(cpu.capacity, int64_t(3) << 30);
  EXPECT_EQ(cpu.profile, backend::host_cpu_profile());
  testing::expect_error([] { plan_target("cuda", "rtx9090", ""); }, "[memplan]",
                        "neither a size (24GiB) nor a card (v100-16g, rtx3090");
  testing::expect_error([] { plan_target("tpu", "", ""); }, "[memplan]", "cuda or cpu");
  testing::expect_error([] { plan_target("cuda", "256MiB", ""); }, "[memplan]", "leaves nothing");
}

// Note [The step's cost model] against the published counts: Llama-2-7B has 6,738,415,616
// parameters, of which the embedding (32000 x 4096) and the 65 norm vectors do no matmul,
// so a dense step of tau tokens does 6 N tau with N = 6,607,077,376, plus attention.
TEST(MemplanCost, FlopsAreSixTimesTheMatmulWeightsPerTokenPlusAttention) {
  const nn::ModelConfig cfg = nn::preset("llama2-7b");
  const double N = 6'738'415'616.0 - 32000.0 * 4096 - 65 * 4096;
  TrainArgs a = tiny_args();
  a.model = "llama2-7b";
  a.seq_len = 2048;
  a.per_device_train_batch_size = 2;
  const Rates rates = plan_target("cuda", "h100", "").rates;
  const double tau = 2.0 * 2048, attn = 2.0 * 32 * 2 * 2048.0 * 2048 * 4096;
  const StepCost dense = step_cost(cfg, a, rates);
  EXPECT_DOUBLE_EQ(dense.flops, 6 * N * tau + 3.5 * attn);
  // Checkpointing recomputes the blocks' forward: everything but the head's.
  a.gradient_checkpointing = true;
  const double blocks = N - 32000.0 * 4096;
  EXPECT_DOUBLE_EQ(step_cost(cfg, a, rates).flops,
                   6 * N * tau + 3.5 * attn + 2 * blocks * tau + attn);
  // A frozen 4-bit base computes no weight gradients.
  a.gradient_checkpointing = false;
  a.quantize = "nf4";
  a.lora_r = 16;
  EXPECT_DOUBLE_EQ(step_cost(cfg, a, rates).flops, 4 * N * tau + 3.5 * attn);
  // Accumulation repeats the micro-batch; bf16 runs at the card's bf16 rate.
  a = tiny_args();
  a.model = "llama2-7b";
  a.seq_len = 2048;
  const StepCost one = step_cost(cfg, a, rates);
  a.gradient_accumulation_steps = 3;
  const StepCost three = step_cost(cfg, a, rates);
  EXPECT_DOUBLE_EQ(three.flops, 3 * one.flops);
  EXPECT_GT(three.bytes - one.bytes, 2 * (2 * N * 4));  // and fp32 gradients accumulate
  a.gradient_accumulation_steps = 1;
  a.bf16 = true;
  EXPECT_LT(step_cost(cfg, a, rates).seconds, one.seconds / 5);
  const Rates v100 = plan_target("cuda", "v100-16g", "").rates;
  testing::expect_error([&] { step_cost(cfg, a, v100); }, "[memplan]", "no bf16 arithmetic");
  // The fused head recomputes the head's product, the tiled MLP each MLP (3 C I weights),
  // over the micro-batch's 4 x 2048 tokens.
  a.bf16 = false;
  a.fused_head_loss = true;
  EXPECT_DOUBLE_EQ(step_cost(cfg, a, rates).flops, one.flops + 2 * 32000.0 * 4096 * 4 * 2048);
  a.fused_head_loss = false;
  a.tiled_mlp = true;
  EXPECT_DOUBLE_EQ(step_cost(cfg, a, rates).flops,
                   one.flops + 2 * 32 * (3 * 4096.0 * 11008) * 4 * 2048);
}

// APOLLO's projection costs 2 r flops per projected weight (the blocks' linears, not the
// head), and its optimizer traffic is 20 B per projected weight against AdamW's 28.
TEST(MemplanCost, ApolloPaysForItsProjection) {
  const nn::ModelConfig cfg = nn::preset("llama2-7b");
  const double blocks = 32 * (4 * 4096.0 * 4096 + 3 * 4096.0 * 11008);
  TrainArgs a = tiny_args();
  a.model = "llama2-7b";
  const Rates rates = plan_target("cuda", "h100", "").rates;
  const StepCost adamw = step_cost(cfg, a, rates);
  a.optim = "apollo";
  EXPECT_DOUBLE_EQ(step_cost(cfg, a, rates).flops, adamw.flops + 2 * 256 * blocks);
  EXPECT_DOUBLE_EQ(step_cost(cfg, a, rates).bytes, adamw.bytes - 8 * blocks);
  a.optim_args = "rank=16";
  EXPECT_DOUBLE_EQ(step_cost(cfg, a, rates).flops, adamw.flops + 2 * 16 * blocks);
  a.optim = "apollo_mini";
  a.optim_args = "";
  EXPECT_DOUBLE_EQ(step_cost(cfg, a, rates).flops, adamw.flops + 2 * blocks);
}

// A context where checkpointing alone runs out of a card: the search turns on the fused
// head with the tiled MLP, and offload, and what it proposes fits.
TEST(MemplanFit, ALongContextTurnsOnRowChunksAndOffload) {
  nn::ModelConfig c = nn::preset("llama-tiny");
  c.vocab_size = 8192;
  c.intermediate_size = 1024;
  c.max_position_embeddings = 8192;
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("fitgrad_memplan_long_" + std::to_string(::getpid()) + ".json"))
                               .string();
  std::ofstream(path) << nn::config_to_json(c).dump();
  TrainArgs base = tiny_args();
  base.model = path;
  base.seq_len = 8192;
  base.per_device_train_batch_size = 1;
  base.bf16 = true;
  PlanTarget card = plan_target("cuda", "", "");
  TrainArgs ckpt = base;
  ckpt.gradient_checkpointing = true;
  const Plan plain = plan_training(ckpt, card, "");
  ckpt.fused_head_loss = ckpt.tiled_mlp = true;
  const Plan chunked = plan_training(ckpt, card, "");
  ASSERT_LT(chunked.peak_allocated, plain.peak_allocated);
  card.capacity = (chunked.peak_reserved + plain.peak_allocated) / 2;
  std::ostringstream progress;
  const FitResult r = fit_search(base, c, card, false, progress);
  ASSERT_GE(r.winner, 0) << progress.str();
  const Candidate& w = r.tried[size_t(r.winner)];
  EXPECT_TRUE(w.args.fused_head_loss && w.args.tiled_mlp) << w.setting;
  EXPECT_TRUE(w.plan && w.plan->fits);
  for (int i = 0; i < r.winner; ++i) {
    const Candidate& k = r.tried[size_t(i)];
    if (k.plan) {
      EXPECT_FALSE(k.plan->fits) << k.setting;
    }
  }
  bool offload_tried = false;
  for (const Candidate& k : fit_candidates(base, c, card, false))
    offload_tried |= k.args.offload_activations && k.args.gradient_checkpointing;
  EXPECT_TRUE(offload_tried);
  for (const Candidate& k : fit_candidates(base, c, plan_target("cpu", "", ""), false))
    EXPECT_FALSE(k.args.offload_activations) << "offload has nowhere to go on the CPU";
  std::filesystem::remove(path);
}

// Issue 40: every family's published shape (the presets) gets a QLoRA setting that fits a
// 24 GiB card at 2048 tokens from --fit, which keeps the user's 4-bit base and adapter rank.
TEST(MemplanFit, EveryFamilyFitsQloraOnA24GibCard) {
  for (const char* name : {"llama3.1-8b", "llama3.2-1b", "llama3.2-3b", "qwen2.5-7b", "qwen3-8b",
                           "mistral-7b", "phi-3-mini", "gemma-2-9b", "gemma-3-4b"}) {
    TrainArgs base = tiny_args();
    base.model = name;
    base.seq_len = 2048;
    base.per_device_train_batch_size = 1;
    base.bf16 = true;
    base.quantize = "nf4";
    base.lora_r = 16;
    std::ostringstream progress;
    const FitResult r =
        fit_search(base, nn::preset(name), plan_target("cuda", "rtx4090", ""), false, progress);
    ASSERT_GE(r.winner, 0) << name << "\n" << progress.str();
    const Candidate& w = r.tried[size_t(r.winner)];
    ASSERT_TRUE(w.plan && w.plan->fits) << name << " " << w.setting;
    EXPECT_EQ(w.args.quantize, "nf4") << name;
    EXPECT_EQ(w.args.lora_r, 16) << name;
    EXPECT_LE(w.plan->peak_reserved, plan_target("cuda", "rtx4090", "").capacity) << name;
  }
}

// The search's answer fits, everything predicted faster was planned out of memory or
// needs more memory than one that was, and each of those implied verdicts is right: the
// test plans every candidate the search skipped.
TEST(MemplanFit, TheFastestFittingSettingAndEverySkippedCandidateRunsOut) {
  TrainArgs base = tiny_args();
  base.model = small_llama();
  base.seq_len = 256;
  base.max_grad_norm = 0;  // let optimizer-in-backward in
  const nn::ModelConfig cfg = nn::load_config_json(base.model);
  const PlanTarget unlimited = plan_target("cpu", "", "");
  std::vector<Candidate> all = fit_candidates(base, cfg, unlimited, true);
  const Candidate fastest = *std::min_element(
      all.begin(), all.end(),
      [](const auto& x, const auto& y) { return x.cost.seconds < y.cost.seconds; });
  const Plan first = plan_training(fastest.args, unlimited, "");
  ASSERT_TRUE(first.fits);
  PlanTarget tight = unlimited;
  tight.capacity = first.peak_allocated - 1;  // the fastest candidate cannot fit
  std::ostringstream progress;
  const FitResult r = fit_search(base, cfg, tight, true, progress);
  ASSERT_GE(r.winner, 1) << "the tight budget should rule out the fastest candidates";
  const Candidate& w = r.tried[size_t(r.winner)];
  ASSERT_TRUE(w.plan && w.plan->fits);
  EXPECT_LE(w.plan->peak_reserved, tight.capacity);
  EXPECT_EQ(w.args.per_device_train_batch_size * w.args.gradient_accumulation_steps, 4);
  int implied = 0;
  for (int i = 0; i < r.winner; ++i) {
    const Candidate& c = r.tried[size_t(i)];
    EXPECT_LT(c.cost.seconds, w.cost.seconds * 1.01) << c.setting;  // ties within 1%
    if (c.plan) {
      EXPECT_FALSE(c.plan->fits) << c.setting;
    } else {
      ++implied;
      EXPECT_FALSE(plan_training(c.args, tight, "").fits)
          << c.setting << " was implied by #" << c.implied_by + 1;
    }
  }
  EXPECT_GT(implied, 0);
  EXPECT_EQ(r.tried.size() + r.untried, all.size());
  // The winner's command line selects the winner's setting.
  EXPECT_THAT(setting_flags(w.args),
              ::testing::HasSubstr(fmt::format("--per_device_train_batch_size {}",
                                               w.args.per_device_train_batch_size)));
  EXPECT_THAT(setting_flags(w.args), ::testing::HasSubstr("--optim " + w.args.optim));
}

// One rank of a ZeRO job (issue 43, finding 2): the search keeps to what data parallelism
// runs (no optimizer-in-backward), the run line is a `launch` line with the job's ranks,
// stage and buckets, and that line, parsed as train parses it, plans to fit.
TEST(MemplanFit, OneRankOfAZeroJobGetsALaunchLineThatFits) {
  TrainArgs base = tiny_args();
  base.model = small_llama();
  base.device = "cuda";
  base.max_grad_norm = 0;  // let optimizer-in-backward in, but for the ranks
  base.plan_world_size = 4;
  base.zero_stage = 2;
  base.ddp_bucket_cap_mb = 1;
  const nn::ModelConfig cfg = nn::load_config_json(base.model);
  const PlanTarget target = plan_target("cuda", "256MiB", "0");
  for (const Candidate& c : fit_candidates(base, cfg, target, false))
    EXPECT_FALSE(c.args.optim_in_backward) << c.setting;
  std::ostringstream progress;
  const FitResult r = fit_search(base, cfg, target, false, progress);
  ASSERT_GE(r.winner, 0);
  const std::string line = run_line(r.tried[size_t(r.winner)].args);
  const std::string head = "fitgrad launch --nproc_per_node 4 train --model " + base.model;
  ASSERT_TRUE(line.starts_with(head)) << line;
  EXPECT_THAT(line, ::testing::HasSubstr(" --device cuda "));
  EXPECT_THAT(line, ::testing::HasSubstr(" --zero_stage 2"));
  EXPECT_THAT(line, ::testing::HasSubstr(" --ddp_bucket_cap_mb 1"));
  EXPECT_EQ(global_batch(r.tried[size_t(r.winner)].args), 16);
  // The line as a rank of the job parses it.
  std::string flags = line.substr(std::string("fitgrad launch --nproc_per_node 4 train ").size());
  flags.replace(flags.find("<corpus>"), 8, "corpus.txt");
  flags.replace(flags.find("<dir>"), 5, "out");
  CLI::App app;
  TrainArgs parsed;
  add_train_options(app, parsed);
  app.parse(flags);
  parsed.max_steps = 2;
  parsed.eval_strategy = "no";
  parsed.data.clear();
  parsed.output_dir.clear();
  parsed.plan_world_size = 4;  // the job's ranks, which the launcher gives
  EXPECT_TRUE(plan_training(parsed, target, "").fits) << line;
  // The same job on 2 hosts: one launcher per host, the same per-rank line after `train`.
  TrainArgs two_hosts = r.tried[size_t(r.winner)].args;
  two_hosts.plan_nnodes = 2;
  const std::string per_host = run_line(two_hosts);
  EXPECT_TRUE(
      per_host.starts_with("fitgrad launch --nnodes 2 --node_rank <0..1> "
                           "--nproc_per_node 2 --master_addr <host of node 0> "
                           "--master_port 29500 train --model " +
                           base.model))
      << per_host;
  EXPECT_EQ(per_host.substr(per_host.find(" train ")), line.substr(line.find(" train ")));
  // A stage without the job's ranks is refused by the flag that is missing.
  MemplanArgs m;
  m.train.model = "gpt2-tiny";
  m.train.zero_stage = 1;
  std::ostringstream out, err;
  testing::expect_error([&] { run_memplan(m, out, err); }, "[memplan] --zero_stage 1",
                        "give --world_size");
}

// GaLore in the search and the cost model: both variants are candidates (never with LoRA);
// the user's GaLore --optim_args pass between the two GaLores and to no other optimizer, the
// user's --optim_target_modules go to the low-rank optimizers only, and a GaLore the user
// gave no targets takes attn,mlp; a step adds its projections (4 r m n per block matrix) and
// a share of each matrix's SVD on the card: its Gram matrix (2 d^2 D FLOPs at the f32 rate)
// and the eigensolver (9 d^3 at 1 TFLOP/s), once per update_proj_gap steps.
TEST(MemplanFit, KnowsGalore) {
  TrainArgs base = tiny_args();
  base.optim = "galore_adamw";
  base.optim_args = "rank=8";
  base.optim_target_modules = "attn";
  std::set<std::string> optimizers;
  for (const Candidate& c :
       fit_candidates(base, nn::preset("llama-tiny"), plan_target("cpu", "", ""), true)) {
    optimizers.insert(c.args.optim);
    const bool galore = c.args.optim.starts_with("galore_");
    if (galore) {
      EXPECT_EQ(c.args.lora_r, 0) << c.setting;
    }
    EXPECT_EQ(c.args.optim_args, galore ? "rank=8" : "") << c.setting;
    EXPECT_EQ(c.args.optim_target_modules,
              galore || c.args.optim.starts_with("apollo") ? "attn" : "")
        << c.setting;
    if (galore) {
      EXPECT_THAT(setting_flags(c.args),
                  ::testing::HasSubstr("--optim_args rank=8 --optim_target_modules attn"));
    }
  }
  EXPECT_TRUE(optimizers.count("galore_adamw") && optimizers.count("galore_adamw_8bit"));
  for (const Candidate& c :
       fit_candidates(tiny_args(), nn::preset("llama-tiny"), plan_target("cpu", "", ""), false))
    if (c.args.optim.starts_with("galore_")) {
      EXPECT_EQ(c.args.optim_args, "") << c.setting;
      EXPECT_EQ(c.args.optim_target_modules, "attn,mlp") << c.setting;
    }
  const nn::ModelConfig cfg = nn::preset("llama2-7b");
  const Rates rates = plan_target("cuda", "h100", "").rates;
  TrainArgs a = tiny_args();
  a.model = "llama2-7b";
  const StepCost adamw = step_cost(cfg, a, rates);
  a.optim = "galore_adamw";
  a.optim_target_modules = "attn,mlp";  // Trainer's default rank 128
  const StepCost galore = step_cost(cfg, a, rates);
  const double h = 4096, I = 11008;
  EXPECT_DOUBLE_EQ(galore.flops - adamw.flops, 32 * 4 * 128.0 * (4 * h * h + 3 * h * I));
  a.optim_args = "update_proj_gap=100";
  const StepCost twice = step_cost(cfg, a, rates);
  EXPECT_DOUBLE_EQ(twice.flops, galore.flops);
  auto svd = [&](double D) {
    return 2 * h * h * D / (rates.fp32_tflops * 1e12) + 9 * h * h * h / 1e12;
  };
  const double refresh = 32 * (4 * svd(h) + 3 * svd(I));  // every target once, seconds
  EXPECT_NEAR(twice.seconds - galore.seconds, refresh / 100 - refresh / 200, 1e-9);
  a.optim_args = "rank=64,update_proj_gap=400";
  const StepCost smaller = step_cost(cfg, a, rates);
  EXPECT_DOUBLE_EQ(smaller.flops - adamw.flops, 32 * 4 * 64.0 * (4 * h * h + 3 * h * I));
  EXPECT_LT(smaller.seconds, galore.seconds);
}

TEST(MemplanFit, OptimizerInBackwardOnlyWithoutClipping) {
  const TrainArgs clipped = tiny_args();  // max_grad_norm 1.0
  for (const Candidate& c :
       fit_candidates(clipped, nn::preset("llama-tiny"), plan_target("cpu", "", ""), false)) {
    EXPECT_FALSE(c.args.optim_in_backward) << c.setting;
    EXPECT_TRUE(c.args.quantize.empty()) << c.setting;  // no --allow_qlora
  }
}

// The bisection's answer fits and one token more does not.
TEST(MemplanSeq, TheLongestSequenceFitsAndOneMoreDoesNot) {
  TrainArgs base = tiny_args();
  base.model = small_llama();  // 256 positions
  const PlanTarget unlimited = plan_target("cpu", "", "");
  base.seq_len = 256;
  const Plan whole = plan_training(base, unlimited, "");
  PlanTarget tight = unlimited;
  tight.capacity = whole.peak_allocated - 1;  // below the allocated peak: cannot fit
  std::ostringstream progress;
  base.seq_len = 64;  // the first guess
  const LargestResult r = largest_fitting(base, tight, Knob::seq_len, 256, progress);
  ASSERT_GT(r.largest, 1);
  ASSERT_LT(r.largest, 256);
  ASSERT_TRUE(r.plan && r.plan->fits);
  base.seq_len = r.largest + 1;
  EXPECT_FALSE(plan_training(base, tight, "").fits);
  base.seq_len = r.largest;
  EXPECT_TRUE(plan_training(base, tight, "").fits);
  EXPECT_LT(r.probes.size(), 12u);  // log2(256) + the limit's probe and the first guess
}

TEST(MemplanBatch, TheLargestBatchFitsAndOneMoreDoesNot) {
  TrainArgs base = tiny_args();
  base.model = small_llama();
  base.seq_len = 128;
  base.per_device_train_batch_size = 32;
  const PlanTarget unlimited = plan_target("cpu", "", "");
  const Plan big = plan_training(base, unlimited, "");
  PlanTarget tight = unlimited;
  tight.capacity = big.peak_allocated - 1;
  std::ostringstream progress;
  base.per_device_train_batch_size = 1;
  const LargestResult r = largest_fitting(base, tight, Knob::batch_size, 32, progress);
  ASSERT_GE(r.largest, 1);
  ASSERT_LT(r.largest, 32);
  base.per_device_train_batch_size = r.largest + 1;
  EXPECT_FALSE(plan_training(base, tight, "").fits);
  base.per_device_train_batch_size = r.largest;
  EXPECT_TRUE(plan_training(base, tight, "").fits);
}

// memplan plans evaluation only when asked (--eval_strategy steps), as train then runs it.
TEST(MemplanPlan, EvaluationIsPlannedOnlyWhenAsked) {
  TrainArgs a = tiny_args();
  const PlanTarget cpu = plan_target("cpu", "", "");
  const Plan without = plan_training(a, cpu, "");
  a.eval_strategy = "steps";
  a.eval_steps = 1;
  a.eval_max_batches = 2;
  const Plan with = plan_training(a, cpu, "");
  EXPECT_GT(with.total_allocated, without.total_allocated);
}

// Note [Steps a plan extrapolates]: a million steps with evaluation, logging and emptying
// the cache at intervals plan 6 steps, and their peak, fragmentation and categories are
// those of simulating every step of a 30-step run with the same intervals (issue 31: a
// million steps were simulated one by one, a minute and counting for gpt2-tiny).
TEST(MemplanPlan, AMillionStepsPlanLikeEveryStepOfAShortRun) {
  TrainArgs a = tiny_args();
  a.eval_strategy = "steps";
  a.eval_steps = 4;
  a.logging_steps = 5;
  a.torch_empty_cache_steps = 7;
  const PlanTarget target = plan_target("cuda", "24GiB", "");
  a.max_steps = 30;
  const Plan every = plan_training(a, target, nullptr, /*every_step=*/true);
  EXPECT_EQ(every.planned_steps, 30);
  for (const int64_t steps : {int64_t(7), int64_t(30), int64_t(1000000)}) {
    a.max_steps = steps;
    const Plan p = plan_training(a, target, nullptr);
    EXPECT_EQ(p.planned_steps, kPlannedSteps) << steps;
    EXPECT_EQ(p.run_steps, steps);
    EXPECT_EQ(p.peak_allocated, every.peak_allocated) << steps;
    EXPECT_EQ(p.peak_reserved, every.peak_reserved) << steps;
    EXPECT_EQ(p.reserved_at_peak, every.reserved_at_peak) << steps;
    EXPECT_EQ(p.peak_by_category, every.peak_by_category) << steps;
    EXPECT_EQ(p.fits, every.fits);
  }
  // A run of kPlannedSteps steps or fewer is planned as it is.
  a.max_steps = 3;
  EXPECT_EQ(plan_training(a, target, nullptr).planned_steps, 3);
}

// Note [One validation]: a plan is refused exactly when the run would be, with the run's
// own words (issue 31: memplan planned --offload_optimizer on a CPU that train refuses).
TEST(MemplanValidation, RefusedExactlyAsTrainRefuses) {
  // --offload_activations plans and runs on cpu too (cpu:1 is its far memory), and only
  // without checkpointing is it refused.
  const std::vector<std::pair<std::function<void(TrainArgs&)>, std::string>> settings = {
      {[](TrainArgs& a) { a.offload_optimizer = true; }, "needs --device cuda"},
      {[](TrainArgs& a) { a.offload_activations = true; }, "needs --gradient_checkpointing"},
  };
  for (const auto& [set, refusal] : settings) {
    TrainArgs run;
    run.model = "gpt2-tiny";
    run.device = "cpu";
    run.data = "corpus.txt";
    run.output_dir = "out";
    run.max_steps = 2;
    set(run);
    std::string train_error, memplan_error;
    try {
      validate(run);
    } catch (const Error& e) {
      train_error = e.what();
    }
    MemplanArgs m;
    m.train.model = "gpt2-tiny";
    m.train.device = "cpu";
    m.train.seq_len = 32;
    set(m.train);
    std::ostringstream out, err;
    try {
      run_memplan(m, out, err);
    } catch (const Error& e) {
      memplan_error = e.what();
    }
    EXPECT_THAT(train_error, ::testing::HasSubstr(refusal));
    EXPECT_EQ(memplan_error, train_error);
  }
  MemplanArgs m;
  m.train.model = "gpt2-tiny";
  m.train.device = "cuda";  // the plan of --offload_optimizer for a card is made
  m.train.seq_len = 32;
  m.train.offload_optimizer = true;
  std::ostringstream out, err;
  EXPECT_EQ(run_memplan(m, out, err), 0) << err.str();
  m.train.device = "cpu";
  m.train.offload_optimizer = false;
  m.train.gradient_checkpointing = m.train.offload_activations = true;
  EXPECT_EQ(run_memplan(m, out, err), 0) << err.str();
}

TEST(MemplanPlan, ModulesOfLabels) {
  EXPECT_EQ(module_of("model.layers.3.self_attn.q_proj.weight"), "model.layers.3.self_attn");
  EXPECT_EQ(module_of("model.layers.3.mlp/silu"), "model.layers.3.mlp");
  EXPECT_EQ(module_of("lm_head.weight"), "lm_head");
  EXPECT_EQ(module_of("data.train"), "data");
  EXPECT_EQ(module_of("h.11"), "h.11");
}

// Note [Optimizer offload]: Llama-2-7B's full fine-tuning (6,738,415,616 parameters, fp32
// weights, AdamW) does not fit an 80 GB A100 with its optimizer on the card; offloaded, the
// device keeps weights, gradients and activations, and the plan's host side holds the f32
// masters, AdamW's two moments and the pulled gradients: 16 bytes per parameter.
TEST(MemplanOffload, SevenBillionFullFineTuningFitsAnA100WithItsOptimizerOnTheHost) {
  TrainArgs a;
  a.model = "llama2-7b";
  a.seq_len = 512;
  a.per_device_train_batch_size = 1;
  a.bf16 = true;
  a.gradient_checkpointing = true;
  a.max_steps = 1;
  a.eval_strategy = "no";
  const PlanTarget card = plan_target("cuda", "a100-80g", "");
  const Plan on_card = plan_training(a, card, "");
  EXPECT_FALSE(on_card.fits);
  EXPECT_EQ(on_card.host_peak_allocated, 0);
  a.offload_optimizer = true;
  const Plan offloaded = plan_training(a, card, "");
  ASSERT_TRUE(offloaded.fits) << offloaded.oom_report;
  const double params = 6'738'415'616.0;
  EXPECT_GE(double(offloaded.host_peak_allocated), 16 * params);
  EXPECT_LT(double(offloaded.host_peak_allocated), 16.01 * params);
  EXPECT_EQ(offloaded.peak_by_category[size_t(Category::optimizer_state)], 0);
}

// Note [Activation offload]: with checkpointing, Llama-2-7B QLoRA at 4096 tokens keeps its
// segment inputs and the head's saved tensors on the card from forward to backward;
// offloaded, they are planned as host memory, the card's activation peak falls, and the
// host side holds at least the 32 segment inputs (4096 x 4096 bf16 each).
TEST(MemplanOffload, OffloadedActivationsMoveTheCheckpointsToTheHost) {
  TrainArgs a;
  a.model = "llama2-7b";
  a.seq_len = 4096;
  a.per_device_train_batch_size = 1;
  a.bf16 = true;
  a.gradient_checkpointing = true;
  a.quantize = "nf4";
  a.lora_r = 16;
  a.max_steps = 1;
  a.eval_strategy = "no";
  const PlanTarget card = plan_target("cuda", "h100", "");
  const Plan on_card = plan_training(a, card, "");
  a.offload_activations = true;
  const Plan offloaded = plan_training(a, card, "");
  ASSERT_TRUE(on_card.fits && offloaded.fits);
  const auto activation = size_t(Category::activation);
  EXPECT_LT(offloaded.peak_by_category[activation], on_card.peak_by_category[activation]);
  EXPECT_LT(offloaded.peak_allocated, on_card.peak_allocated);
  EXPECT_GE(offloaded.host_peak_allocated, int64_t(32) * 4096 * 4096 * 2);
  EXPECT_EQ(on_card.host_peak_allocated, 0);
}

}  // namespace
}  // namespace fitgrad::apps
