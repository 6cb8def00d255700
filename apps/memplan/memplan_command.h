// `fitgrad memplan`: the exact memory plan of a training setup for a target card, before
// anything is allocated (apps/memplan/: targets.h, plan.h, cost_model.h, search.h).
//
//   fitgrad memplan --model llama2-7b --quantize nf4 --lora_r 16 --bf16
//       --gradient_checkpointing --seq_len 2048 --per_device_train_batch_size 1
//       --device_memory rtx4090
//
// It takes `fitgrad train`'s flags, runs --max_steps (2 by default) complete steps on meta
// with the target's profile and capacity, and prints the peak allocated and reserved, what
// held the peak by category and by module, the step and phase of the peak, the
// fragmentation, and a verdict: it fits, or the out-of-memory report the real run would
// print. --fit searches for the fastest setting that fits (Note [The fit search]);
// --max_seq_len bisects for the longest --seq_len that fits, --max_batch_size for the
// largest micro-batch. Evaluation is planned only with --eval_strategy steps (memplan's
// default is no, as Hugging Face's Trainer's).
// --output_dir DIR keeps the plan's memory record in DIR (Note [Where a plan writes] in
// plan.h): DIR is never a training run's directory or inside one, an existing record there
// is replaced only with --overwrite, and the command says where it writes before planning.
// Exit codes: 0 it fits (or a search found a setting), 3 it does not, 1 bad input.
#pragma once
#include <CLI/CLI.hpp>
#include <ostream>

#include "train/train_args.h"

namespace fitgrad::apps {

struct MemplanArgs {
  train::TrainArgs train;       // train's flags; train.output_dir: where the record goes
  std::string device_memory;    // a card name or a size; "" the default
  std::string context_reserve;  // "" kCudaContextReserve
  bool fit = false;
  bool allow_qlora = false;
  bool max_seq_len = false;
  int64_t seq_limit = 0;  // 0: the model's context
  bool max_batch_size = false;
  int64_t batch_limit = 1024;
  bool verbose = false;
  bool overwrite = false;  // replace a plan's record in --output_dir

  MemplanArgs();  // memplan's defaults: --device cuda, --max_steps 2, --eval_strategy no
};

// Runs the command; returns its exit code (0, or kExitOutOfMemory when nothing fits).
// Throws fitgrad::Error "[memplan] ..." on bad input, before planning.
int run_memplan(const MemplanArgs& args, std::ostream& out, std::ostream& err);

void add_memplan_command(CLI::App& app);

}  // namespace fitgrad::apps
