// The training run: trains (or finetunes) a decoder on a text corpus, the way the Hugging
// Face Trainer does, and records where the memory went. `fitgrad train` is this run behind
// its flags.
//
// Note [The run as a library]
// The whole run lives here, below the command line: apps/train/train_command.cpp only parses
// the flags into TrainArgs (their table, train_flags.h, generates the CLI) and calls
// run_train. A program that embeds fitgrad fills TrainArgs itself and calls run_train, which
// validates them as the CLI does (validate() runs each flag's check from the table), or it
// drives train::TrainStep with its own objective (examples/custom_objective.cpp). The run
// stops at the next step boundary once the process-wide flag of tensor/interrupt.h holds a
// signal (note_interrupt): the command line's SIGINT and SIGTERM handlers set it
// (apps/interrupt.h); an embedding program sets it from its own handler or thread.
//
// One optimizer step is train::TrainStep (train/train_step.h; under autocast with --bf16,
// Note [Autocast] in autograd/autocast.h): for each of the gradient_accumulation_steps
// micro-batches, forward, the mean cross-entropy scaled by 1/accumulation, backward
// (gradients accumulate with +=); then gradient clipping, the optimizer step at the
// scheduled learning rate, and zero_grad. The losses stay on the device until a logging
// step. Every --logging_steps a metrics record (the mean training loss over the interval,
// as Hugging Face logs it), every --eval_steps the validation loss and perplexity, every
// --save_steps an atomic checkpoint (checkpoint_dir.h; none with --save_strategy no):
//
//   checkpoint-<step>/model.safetensors      the weights, Hugging Face names
//                     config.json             Hugging Face style (nn::config_to_json)
//                     fitgrad_tokenizer.json  which tokenizer (train/model_source.h)
//                     optimizer.safetensors   every optimizer state tensor and the step
//                     trainer_state.json      step, loader position, RNG state, log history
//
// Note [Bitwise resume]
// Everything the next step reads is in the checkpoint: the f32 weights and optimizer
// states as stored bytes, the optimizer's step count, the loader's (epoch, batch) position
// and seed, and the global generator's (seed, offset). The learning rate is a function of
// the step. The CPU kernels reduce in a fixed order for a fixed thread count, so a resumed
// run repeats the uninterrupted run's losses bit for bit. A resume must keep --seq_len,
// the global batch (--per_device_train_batch_size times the world size of a data-parallel
// run, which may change: the loader's position counts global batches),
// --gradient_accumulation_steps, --seed, --bf16 and --tf32 (checked).
//
// The output directory also receives metrics.jsonl, loss_curve.svg and, at the end, on an
// interrupt and on an out-of-memory, the memory record of the run: memory.json (snapshot +
// trace, docs/memory.md), memory_trace.json (Chrome/Perfetto), peak_report.txt and
// memory_summary.txt. With --device meta the run is a dry run (Note [Dry run on meta] in
// train_run.h) that writes only that memory record. The phases of a run are in
// train_run.h.
#pragma once
#include <ostream>

#include "train/train_args.h"

namespace fitgrad::train {

// The exit code of run_train after an out-of-memory (an interrupt gives 128 + the signal).
inline constexpr int kExitOutOfMemory = 3;

// Runs a training job. `out` gets the summary lines and `err` the progress display.
// Returns 0, kExitOutOfMemory (the allocator's report was printed; the newest checkpoint
// on disk is intact) or 128 + signal after an interrupt (a checkpoint was saved). Throws
// fitgrad::Error for bad input, before anything is trained.
int run_train(const TrainArgs& args, std::ostream& out, std::ostream& err);

}  // namespace fitgrad::train
