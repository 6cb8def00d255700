// The state of one `fitgrad train` run and its phases, each in its own file: setup
// (train_setup.cpp: output directory, model, data, optimizer, schedule), checkpoints
// (train_checkpoint.cpp: save, resume, trainer_state.json), evaluation (train_eval.cpp),
// the memory record and the out-of-memory report (train_memory.cpp), and the loop that
// drives them (trainer.cpp). The step itself is train::TrainStep (train/train_step.h).
//
// Note [Dry run on meta]
// With --device meta the whole run happens on meta tensors: the model, the optimizer state,
// every activation and workspace are allocated in meta's ledger exactly as a real run
// allocates them, and nothing is computed. No batch is read: each micro-batch is a pair of
// meta (batch, seq) i64 tensors allocated as the loader allocates its batches
// (Category::data, "data.train"; evaluation batches "data.validation"). There are no
// losses, no metrics.jsonl and no checkpoint; the memory record (memory.json,
// memory_trace.json, peak_report.txt, memory_summary.txt) is written as a real run writes
// it, so a dry run and a real run with the same flags have the same event sequence. With
// --data the dry run sizes its epochs and evaluations from the data's splits as the real
// run does; without it, it needs --max_steps and evaluates --eval_max_batches full batches
// (1 when that is 0, the whole split) (Note [A dry run sizes its splits from the data] in
// train_setup.cpp). Instruction data of one example a row (--packing none, preference pairs)
// has each batch cut to its longest example; a dry run with --data then builds the loader's
// batches on the host, for their shapes only, so that its meta batches have the real run's
// lengths (without --data it plans rows of --seq_len, the longest a batch can be).
#pragma once
#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "data/loader.h"
#include "data/token_dataset.h"
#include "dist/ddp.h"
#include "dist/process_group.h"
#include "dist/zero.h"
#include "nn/lora.h"
#include "optim/loss_scaler.h"
#include "optim/offload.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "tensor/backend/math_mode.h"
#include "tensor/backend/profile.h"
#include "tensor/memory/caching_allocator.h"
#include "train/eval_prompts.h"
#include "train/metrics.h"
#include "train/model_source.h"
#include "train/objectives/grpo_generation.h"
#include "train/output_lock.h"
#include "train/progress.h"
#include "train/train_args.h"
#include "train/train_sft.h"
#include "train/train_step.h"

namespace fitgrad::train {

using TrainClock = std::chrono::steady_clock;

// A loader's batch as the step takes it, its tensors moved (so that they are freed in one
// order, a dry run's meta batches' too).
train::MicroBatch micro_batch(data::Batch&& batch);

struct TrainRun {
  TrainRun(const TrainArgs& args, std::ostream& out, std::ostream& err);
  // An in-process caller (the tests) gets the allocator's capacity and mode back, and the math mode
  // through tf32's scope.
  ~TrainRun();
  TrainRun(const TrainRun&) = delete;
  TrainRun& operator=(const TrainRun&) = delete;

  // The next training micro-batch: the loader's, or meta tensors in a dry run.
  train::MicroBatch next_batch();
  // A dry run's batch without data: (batch, --seq_len) ids and targets on meta (2 batch rows
  // rows an example for pairs), and a packed batch's positions and segments, allocated as the loader labels
  // its batches ("data.train", "data.validation"; Note [Dry run on meta]).
  train::MicroBatch meta_batch(int64_t batch, const char* label, bool packed_rows) const;
  // A dry run's stand-in for a batch its host loader built: meta tensors of the same shapes,
  // allocated in the loader's order under its label, and the same counts and spans.
  train::MicroBatch meta_of(const data::Batch& batch, const char* label) const;
  // Epochs done after `step` optimizer steps (0 in a dry run without data: no epochs).
  double epoch_at(int64_t step) const;
  // The elements of the parameters the optimizer updates (all of them, or the adapters).
  int64_t optimized_parameters() const;
  std::string loss_curve_title() const;
  // Whether this process writes the run's files: one process, rank 0 of a job, or the plan
  // of any one rank (Note [Planning one rank] in dist/meta_group.h).
  bool writes_outputs() const { return !group || group->rank() == 0 || dry_run; }

  const TrainArgs& a;
  std::ostream& out;
  std::ostream& err;
  Device device;
  bool dry_run;  // Note [Dry run on meta]
  // A plan's target (TrainArgs::planned_profile) as meta's, for the run's lifetime: the
  // first member after the device, so it outlives every tensor the run makes.
  std::optional<backend::MetaTargetScope> meta_target;
  CachingAllocator& alloc;
  Progress progress;
  size_t capacity_before;
  AllocatorMode mode_before;
  backend::MatmulTf32Scope tf32;  // the run's mode, the previous one restored after
  std::filesystem::path dir;
  std::optional<OutputDirLock> lock;  // Note [Output directory lock]
  std::string resume_dir;             // the verified checkpoint to resume, or ""
  // Where the run is, for an out-of-memory report: "in step 3 of 10", "in the evaluation
  // after step 2".
  std::string phase;

  LoadedModel lm;
  std::optional<nn::LoraConfig> lora;         // a LoRA run's settings (Note [LoRA runs])
  std::optional<data::TokenDataset> dataset;  // text --data (not in a dry run without)
  std::optional<SftData> sft;                 // instruction or chat --data
  std::vector<GrpoPrompt> grpo_prompts;       // --objective grpo's --data (Note [GRPO runs])
  // The splits' tokens and trained flags (empty: every target trained), from either.
  struct Split {
    std::span<const int32_t> tokens;
    std::span<const uint8_t> trained;
    std::span<const int32_t> positions;  // packed rows (data/sft_stream.h); empty: none
    std::span<const int32_t> lengths;    // one example a row: each row's (pair's) length
    std::span<const uint8_t> labels;     // unpaired examples (KTO): each example's label
  };
  Split train_data, val_data;
  // The rows pack several examples (--packing bfd or wrapped), or a batch's answers (pairs).
  bool packed = false;
  // --objective's (Note [Objectives as units] in train/objectives/objective.h), which the
  // step runs; the last evaluation's statistics.
  std::shared_ptr<train::TrainObjective> objective;
  train::ObjectiveMetrics eval_metrics;
  // The objective's reference (ObjectiveReference::model) where it is not the model with its
  // adapters off (Note [Preference steps] in train/preference_loss.h).
  struct Reference {
    // A full fine-tune without --precompute_ref_log_probs: a frozen copy of the initial weights.
    std::unique_ptr<nn::CausalLM> model;
    // --precompute_ref_log_probs: the reference's summed NLL of each row of the training and
    // validation streams (train_reference.cpp); empty otherwise.
    std::vector<double> train, val;
  };
  Reference reference;
  std::vector<EvalPrompt> eval_prompts;              // --eval_prompts
  std::unique_ptr<data::Loader> loader;              // not in a dry run
  std::unique_ptr<optim::OptimizerOffload> offload;  // --offload_optimizer: the host masters
  std::unique_ptr<optim::Optimizer> optimizer;
  std::optional<optim::LrSchedule> schedule;
  std::optional<optim::LossScaler> scaler;  // --fp16 (Note [Dynamic loss scaling])
  // Under a launcher (Note [Data-parallel runs] in train_dist.h): the group and the
  // gradient buckets; null in one process. Declared before step_fn, which points at ddp, and
  // the group before ddp: the buckets end first, and may abort the group as they do (a failed
  // step's all-reduces still pending: Note [Aborting a group] in dist/process_group.h).
  std::unique_ptr<dist::ProcessGroup> group;
  std::unique_ptr<dist::GradBuckets> ddp;
  std::unique_ptr<dist::ZeroSharding> zero;  // --zero_stage 1|2 (dist/zero.h)
  std::unique_ptr<train::TrainStep> step_fn;
  std::optional<MetricsLog> metrics;  // not in a dry run

  int64_t step = 0, total = 0, batches_per_epoch = 0, eval_batches = 0, eval_batch = 0;
  int64_t last_saved = -1;
  int64_t skipped_steps = 0;  // steps the loss scaler skipped (inf or NaN gradients)
  double last_lr = 0.0;       // the learning rate of the latest step
  std::vector<nlohmann::json> resumed_history;
  TrainClock::time_point run_start = TrainClock::now();
  int64_t run_start_step = 0;
};

// train_setup.cpp: validates, prepares the output directory, builds everything, resumes
// when asked, and prints the run's summary lines.
void setup_run(TrainRun& run);
// train_checkpoint.cpp.
void resume_run(TrainRun& run, const std::string& checkpoint_dir);
void save_checkpoint(TrainRun& run);
nlohmann::json trainer_state_json(const TrainRun& run);
// train_eval.cpp: the mean validation loss (NaN in a dry run) and the tokens it covered;
// nullopt when a signal arrived during it (Note [Signals act within a batch]).
std::optional<std::pair<double, int64_t>> evaluate(TrainRun& run);
// train_reference.cpp: --precompute_ref_log_probs's pass (Note [Precomputed reference]).
void precompute_reference(TrainRun& run);
// A loader's batch as the step takes it, with the precomputed reference values of its rows
// from `ref` (none when `ref` is empty) and, for unpaired examples, the labels of its examples
// from the split's.
train::MicroBatch pair_batch(data::Batch&& batch, const std::vector<double>& ref,
                             const TrainRun::Split& split);
// train_grpo.cpp (Note [GRPO runs]): --objective grpo's prompt records as the run's data and
// its batch plan; the sampling its steps do, started once the step exists; the tokens of the
// last step's completions; the samples file of a logging step.
void setup_grpo_data(TrainRun& run);
void start_grpo_sampling(TrainRun& run);
int64_t grpo_step_tokens(const TrainRun& run);
void write_grpo_samples(TrainRun& run);
// train_memory.cpp.
void write_memory_record(const TrainRun& run);
int report_out_of_memory(TrainRun& run, const OutOfMemory& e, const std::string& when);

}  // namespace fitgrad::train
