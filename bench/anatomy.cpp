// The anatomy of a training step's memory, after the single-GPU table of Hugging Face's
// "efficient training on a single GPU" guide (a V100 16 GB, bert-large-uncased, batch 4,
// seq 512): each row is a setting of that guide, planned exactly on meta by memplan
// (apps/memplan/plan.h) with the CUDA profile of a V100 and a 16 GiB capacity, beside the
// guide's published memory as a ratio to its vanilla row. The model is a decoder of
// BERT-large's width and depth (24 blocks of 1024, 16 heads, MLP 4096, GELU, LayerNorm,
// learned positions, vocabulary 30522, a tied head, dropout 0.1 as BERT's): GPT-2's layout
// at BERT-large's shape. A V100 has no bf16, so the guide's fp16 rows are --fp16 (f16
// autocast and the loss scaler). The time column is the cost model's (Note [The step's cost
// model]) on the V100's rates, relative to vanilla. The rows are ordered by memory as the
// guide's and, where the two orders differ, the program says which rows swap.
//
// Usage: build/bench/anatomy [--steps N]   (N optimizer steps per plan, 2 by default)
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/memplan/cost_model.h"
#include "apps/memplan/plan.h"
#include "apps/memplan/targets.h"
#include "nn/config.h"

namespace fitgrad::apps {

using train::TrainArgs;
namespace {

struct Row {
  const char* name;
  double published_mb;  // the guide's V100 figure
  int64_t batch, accumulation;
  bool checkpointing, fp16;
  const char* optim;
};

// The guide's rows and published figures (MB of GPU memory on a V100).
const Row kRows[] = {
    {"vanilla", 14949, 4, 1, false, false, "adamw_torch"},
    {"batch 1 x accumulation 4", 8681, 1, 4, false, false, "adamw_torch"},
    {"+ gradient checkpointing", 6775, 1, 4, true, false, "adamw_torch"},
    {"fp16", 13939, 4, 1, false, true, "adamw_torch"},
    {"everything with fp16", 7275, 1, 4, true, true, "adamw_torch"},
    {"Adafactor", 12295, 4, 1, false, false, "adafactor"},
    {"Adafactor combined", 4847, 1, 4, true, true, "adafactor"},
    {"8-bit Adam", 13085, 4, 1, false, false, "adamw_8bit"},
    {"8-bit Adam combined", 5363, 1, 4, true, true, "adamw_8bit"},
};

nn::ModelConfig bert_large_decoder() {
  nn::ModelConfig c = nn::preset("gpt2-medium");  // 24 blocks of 1024, 16 heads, MLP 4096
  c.name = "bert-large-shaped decoder";
  c.vocab_size = 30522;
  c.max_position_embeddings = 512;
  c.embd_pdrop = c.attn_pdrop = c.resid_pdrop = 0.1;
  return c;
}

int run(int argc, char** argv) {
  int64_t steps = 2;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
      steps = std::stoll(argv[++i]);
    } else {
      fmt::print(stderr, "usage: {} [--steps N]\n", argv[0]);
      return 1;
    }
  }
  const nn::ModelConfig cfg = bert_large_decoder();
  const std::filesystem::path config =
      std::filesystem::temp_directory_path() / "fitgrad_anatomy_config.json";
  std::ofstream(config) << nn::config_to_json(cfg).dump();
  PlanTarget v100 = plan_target("cuda", "v100-16g", "");
  v100.capacity = int64_t(16) << 30;
  v100.name = "v100-16g profile, 16 GiB capacity";

  struct Result {
    Plan plan;
    double seconds;
  };
  std::vector<Result> results;
  for (const Row& row : kRows) {
    TrainArgs a;
    a.model = config.string();
    a.seq_len = 512;
    a.per_device_train_batch_size = row.batch;
    a.gradient_accumulation_steps = row.accumulation;
    a.gradient_checkpointing = row.checkpointing;
    a.fp16 = row.fp16;
    a.optim = row.optim;
    a.max_steps = steps;
    a.eval_strategy = "no";
    results.push_back({plan_training(a, v100, ""), step_cost(cfg, a, v100.rates).seconds});
  }
  fmt::print("target: {}; model: {}, batch 4 x seq 512 per step\n\n", v100.name, cfg.name);
  fmt::print(
      "| row | peak allocated | peak reserved | fits | ratio to vanilla | published MB | "
      "published ratio | predicted time |\n|---|---|---|---|---|---|---|---|\n");
  const double ours0 = double(results[0].plan.peak_reserved), theirs0 = kRows[0].published_mb;
  for (size_t i = 0; i < results.size(); ++i) {
    const Plan& p = results[i].plan;
    fmt::print("| {} | {:.0f} MiB | {:.0f} MiB | {} | {:.3f} | {:.0f} | {:.3f} | {:.2f} |\n",
               kRows[i].name, double(p.peak_allocated) / (1 << 20),
               double(p.peak_reserved) / (1 << 20), p.fits ? "yes" : "no",
               double(p.peak_reserved) / ours0, kRows[i].published_mb,
               kRows[i].published_mb / theirs0, results[i].seconds / results[0].seconds);
  }
  // The two orders by memory, and the pairs of rows they disagree on.
  std::vector<size_t> ours(results.size()), theirs(results.size());
  for (size_t i = 0; i < ours.size(); ++i) ours[i] = theirs[i] = i;
  std::stable_sort(ours.begin(), ours.end(), [&](size_t x, size_t y) {
    return results[x].plan.peak_reserved < results[y].plan.peak_reserved;
  });
  std::stable_sort(theirs.begin(), theirs.end(), [&](size_t x, size_t y) {
    return kRows[x].published_mb < kRows[y].published_mb;
  });
  fmt::print("\norder by memory, ours:      ");
  for (size_t i : ours) fmt::print("{}; ", kRows[i].name);
  fmt::print("\norder by memory, published: ");
  for (size_t i : theirs) fmt::print("{}; ", kRows[i].name);
  fmt::print("\n");
  int swapped = 0;
  for (size_t x = 0; x < results.size(); ++x)
    for (size_t y = x + 1; y < results.size(); ++y) {
      const bool ours_less = results[x].plan.peak_reserved < results[y].plan.peak_reserved;
      const bool theirs_less = kRows[x].published_mb < kRows[y].published_mb;
      if (ours_less != theirs_less) {
        ++swapped;
        fmt::print("rows in the other order: '{}' and '{}'\n", kRows[x].name, kRows[y].name);
      }
    }
  if (swapped == 0)
    fmt::print("the orders agree\n");
  else
    fmt::print("{} pairs in the other order\n", swapped);
  std::filesystem::remove(config);
  return 0;
}

}  // namespace
}  // namespace fitgrad::apps

int main(int argc, char** argv) { return fitgrad::apps::run(argc, argv); }
