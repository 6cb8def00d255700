// `fitgrad train`: options (train_args.h), the run (trainer.h), and exit codes.
#include "apps/train/train_command.h"

#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "apps/guard.h"
#include "apps/train/train_options.h"
#include "nn/config.h"
#include "tensor/error.h"
#include "train/train_args.h"
#include "train/trainer.h"

namespace fitgrad::apps {

using train::kExitOutOfMemory;
using train::run_train;
using train::TrainArgs;

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand(
      "train", "Train or finetune a decoder on a text corpus (Hugging Face Trainer flags)");
  add_train_options(*cmd, *args);
  std::string presets;
  for (const auto& p : nn::preset_names()) presets += (presets.empty() ? "" : ", ") + p;
  cmd->footer(fmt::format(
      "Presets: {}.\n"
      "Outputs in --output_dir: checkpoint-<step>/ (model.safetensors, config.json, "
      "fitgrad_tokenizer.json, optimizer.safetensors, trainer_state.json), metrics.jsonl, "
      "loss_curve.svg, memory.json, memory_trace.json (Perfetto), memory.html (the same trace "
      "as a page: `fitgrad memviz`), peak_report.txt, memory_summary.txt.\n"
      "Ctrl-C (SIGINT) or SIGTERM saves a checkpoint of the last complete step and exits "
      "with 128 + the signal (while loading, and in a dry run, it stops at once and saves "
      "nothing); "
      "out of memory prints the allocator's report and exits {}; bad input (a flag, a file, "
      "a combination, a command-line parse error) exits 1. One run per --output_dir (a lock); "
      "checkpoints are verified on resume (docs/run_promises.md).\n"
      "--bf16, --fp16 (with a dynamic loss scaler) and --tf32 are the precisions.",
      presets, kExitOutOfMemory));
  cmd->callback([args] {
    const int code = run_guarded(
        "train", std::cout, std::cerr, [&] { return run_train(*args, std::cout, std::cerr); },
        "it saved no checkpoint (memory-record files it had finished stay whole)");
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace fitgrad::apps
