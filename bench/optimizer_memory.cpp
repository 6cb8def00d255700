// What each memory-saving choice of issues 12 and 28 costs on GPT-2 (124M): one table row per
// optimizer x precision with the optimizer's state elements and MiB as its specs declare
// them (what it requests from the ledger), the MiB the ledger holds for optimizer_state
// after the first step (with the allocator's rounding), the requested bytes per
// parameter, the peak MiB
// allocated during one training step once the state exists, and the step time (median of
// --steps after a warm-up step). A plain program, not a Google Benchmark: one step takes
// seconds, and the table is its output.
//
// Usage: build/bench/optimizer_memory [--seq N] [--batch N] [--steps N] [--layers N]
//        [--optim NAME] (only that optimizer's rows)
// The step is train::TrainStep on random token ids, no dropout, max_grad_norm 0 (so the
// optimizer-in-backward row is comparable), on the CPU. GaLore's rows use Trainer's defaults
// (rank 128) on the attention and MLP matrices (target modules attn,mlp); their first step,
// untimed, makes the SVDs, which the timed steps (within update_proj_gap) do not.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "nn/config.h"
#include "nn/decoder.h"
#include "optim/factory.h"
#include "optim/schedule.h"
#include "tensor/memory/caching_allocator.h"
#include "train/train_step.h"

namespace fitgrad {
namespace {

struct Row {
  const char* optim;
  const char* precision;  // fp32 | bf16 (autocast) | pure_bf16 | fp32 + in-backward
};

struct Args {
  int64_t seq = 128, batch = 1, steps = 3, layers = 12;
  std::string optim;  // "": every row
};

double mib(int64_t b) { return double(b) / double(1 << 20); }

void run_row(const Row& row, const Args& args) {
  const std::string precision = row.precision;
  nn::ModelConfig cfg = nn::preset("gpt2");
  cfg.num_layers = args.layers;
  cfg.embd_pdrop = cfg.attn_pdrop = cfg.resid_pdrop = 0;
  CachingAllocator& alloc = allocator_for(Device::cpu());
  alloc.empty_cache();
  const int64_t base = alloc.stats().allocated_bytes[kAllPools].current;
  const auto model = nn::build_model(
      cfg, {.dtype = precision == "pure_bf16" ? DType::bf16 : DType::f32, .seed = 1});
  optim::AdamWOptions o;
  o.lr = 1e-4;
  auto opt = optim::make_optimizer(
      row.optim, optim::decay_groups(model->named_parameters(), 0.0), o, true,
      {"", std::string_view(row.optim).starts_with("galore_") ? "attn,mlp" : ""});
  const optim::LrSchedule schedule = optim::make_lr_schedule("constant", 1e-4, 0, 100);
  train::TrainStep step(*model, *opt, schedule,
                        {.compute_dtype = precision == "bf16" ? DType::bf16 : DType::f32,
                         .optimizer_in_backward = precision == "fp32 + in-backward"});
  std::vector<int64_t> ids(size_t(args.batch * (args.seq + 1)));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int64_t((i * 7919 + 13) % 50257);
  const Tensor all = Tensor::from_vector(ids, {args.batch, args.seq + 1}, DType::i64);
  const train::MicroBatch batch{all.narrow(1, 0, args.seq).contiguous(),
                                all.narrow(1, 1, args.seq).contiguous()};
  step.run(0, [&](int64_t) { return batch; });  // creates the optimizer state
  int64_t elements = 0, declared = 0;
  for (size_t i = 0; i < opt->num_params(); ++i) {
    for (const optim::StateSpec& s : opt->state_specs(i)) elements += numel(s.shape);
    declared += optim::state_bytes(opt->state_specs(i));
  }
  const int64_t state = alloc.by_category()[size_t(Category::optimizer_state)].current;
  alloc.reset_peak_stats();
  std::vector<double> times;
  for (int64_t s = 1; s <= args.steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    step.run(s, [&](int64_t) { return batch; });
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  const int64_t peak = alloc.stats().allocated_bytes[kAllPools].peak - base;
  const double params = double(model->num_parameters());
  std::printf("| %-17s | %-18s | %11lld | %9.1f | %8.1f | %7.3f | %8.1f | %7.0f |\n", row.optim,
              row.precision, (long long)elements, mib(declared), mib(state),
              double(declared) / params, mib(peak), 1e3 * times[times.size() / 2]);
  std::fflush(stdout);
}

}  // namespace
}  // namespace fitgrad

int main(int argc, char** argv) {
  using namespace fitgrad;
  Args args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int64_t v = std::atoll(argv[i + 1]);
    if (flag == "--optim")
      args.optim = argv[i + 1];
    else if (flag == "--seq")
      args.seq = v;
    else if (flag == "--batch")
      args.batch = v;
    else if (flag == "--steps")
      args.steps = v;
    else if (flag == "--layers")
      args.layers = v;
    else {
      std::fprintf(stderr, "optimizer_memory: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  std::printf("GPT-2 (%lld layers), batch %lld x %lld tokens, CPU, median of %lld steps\n\n",
              (long long)args.layers, (long long)args.batch, (long long)args.seq,
              (long long)args.steps);
  std::printf(
      "| optimizer | precision | state elements | state MiB | held MiB | B/param | peak MiB | "
      "step ms |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  const Row rows[] = {
      {"adamw_torch", "fp32"},
      {"adamw_torch", "bf16"},
      {"adamw_torch", "pure_bf16"},
      {"adamw_torch", "fp32 + in-backward"},
      {"adamw_8bit", "fp32"},
      {"adamw_8bit", "bf16"},
      {"adamw_8bit", "pure_bf16"},
      {"adafactor", "fp32"},
      {"adafactor", "bf16"},
      {"adafactor", "pure_bf16"},
      {"adafactor_hf", "fp32"},
      {"adafactor_hf", "pure_bf16"},
      {"sgd", "fp32"},
      {"apollo", "fp32"},
      {"apollo", "pure_bf16"},
      {"apollo_mini", "fp32"},
      {"apollo_mini", "pure_bf16"},
      {"apollo_mini", "fp32 + in-backward"},
      {"galore_adamw", "fp32"},
      {"galore_adamw", "pure_bf16"},
      {"galore_adamw", "fp32 + in-backward"},
      {"galore_adamw_8bit", "fp32"},
      {"galore_adamw_8bit", "pure_bf16"},
  };
  for (const Row& row : rows)
    if (args.optim.empty() || args.optim == row.optim) run_row(row, args);
  return 0;
}
