// The training step as a library: forward, loss, backward over the micro-batches of one
// optimizer step (gradient accumulation), clipping, the scheduled learning rate and the
// optimizer step. `fitgrad train`, the benchmarks and the memory planner all run this one
// step, so what they time or plan is what trains.
//
// Note [Loss on the device]
// Each micro-batch's loss is added, on the loss's device and without a gradient, into an
// f32 sum, and a clipped step leaves its squared gradient norm beside it as a double: one
// (4) f32 tensor (Category::other, "train.log"). Nothing is read on the host during a step
// (Note [Host reads] in tensor/host_reads.h; fp16's loss scaler makes its one read, Note
// [The loss scaler's one read]). take_log() reads both values in one copy at a logging step
// and restarts the sum: on CUDA one synchronisation per logging interval instead of several
// per micro-batch. On meta there is nothing to read (a dry run has no losses), and the
// allocations are the real run's. The sum of a logging interval's micro-batch losses is
// f32, as the Hugging Face Trainer's `tr_loss` tensor is.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>

#include "dist/ddp.h"
#include "dist/zero.h"
#include "nn/decoder.h"
#include "optim/loss_scaler.h"
#include "optim/offload.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "tensor/tensor.h"
#include "train/micro_batch.h"
#include "train/objectives/objective.h"
#include "train/preference_loss.h"

namespace fitgrad::train {

struct TrainStepOptions {
  int64_t gradient_accumulation_steps = 1;
  double max_grad_norm = 0.0;        // 0: no clipping
  DType compute_dtype = DType::f32;  // bf16 or f16: the forward and backward under autocast
  // fp16's dynamic loss scaler (Note [Dynamic loss scaling] in optim/loss_scaler.h): the
  // loss is scaled before backward and the gradients unscaled before clipping; a step whose
  // gradients hold an inf or a NaN makes no update. Null: no scaling.
  optim::LossScaler* scaler = nullptr;
  // Note [Optimizer in backward]
  // Each parameter is updated in its gradient hook as soon as its gradient is final in the
  // last micro-batch's backward (Optimizer::step_param), and its gradient is dropped at
  // once, so with one micro-batch at most one parameter gradient is alive (LOMO's trick).
  // A global-norm clip needs every gradient before any update, and the loss scaler's skip
  // decision too, so both are refused with it; earlier micro-batches accumulate as usual. A
  // weight used twice (GPT-2's tied embedding and head) has its gradient final only after
  // its last use, so it stays alive beside the one being updated.
  bool optimizer_in_backward = false;
  // Note [Optimizer offload] (optim/offload.h): the optimizer steps the host masters of
  // `offload`, and the step moves the gradients there and the updated parameters back.
  // Null: the optimizer updates the parameters where they are.
  optim::OptimizerOffload* offload = nullptr;
  // Note [Activation offload] (train/activation_offload.h): the forward's saved activations
  // wait for the backward in host memory.
  bool offload_activations = false;
  // Data parallelism (Note [DDP buckets] in dist/ddp.h): the last micro-batch's backward
  // averages the gradients across the ranks, so clipping, the loss scaler and the optimizer
  // see the reduced gradients; earlier micro-batches accumulate locally. Null: one process.
  dist::GradBuckets* ddp = nullptr;
  // ZeRO (Note [ZeRO by whole parameters] in dist/zero.h): the update of this rank's
  // parameters and their broadcast instead of optimizer.step(); with stage 2 the clipping
  // norm adds the ranks' shares. Needs ddp. Null: every rank steps every parameter.
  dist::ZeroSharding* zero = nullptr;
  // Without an objective: SFT's (train/objectives/sft.h), each micro-batch's mean loss weighted
  // by its share of the step's trained targets (Note [Loss over trained targets] in
  // train_step.cpp), instead of the causal LM's, each weighing 1 / accumulation.
  bool weight_by_targets = false;
  // With an objective that weighs by trained targets (Note [Loss over trained targets] in
  // train_step.cpp) under data parallelism: the ranks whose trained targets the step counts
  // together (the job's group). Null: this process's alone.
  dist::ProcessGroup* targets_group = nullptr;
  // The one objective the step runs (Note [Objectives as units] in
  // train/objectives/objective.h): `fitgrad train`'s --objective, or a program's own
  // (examples/custom_objective.cpp). Null: the causal LM's cross-entropy, SFT's with
  // weight_by_targets, or `preference`'s.
  std::shared_ptr<TrainObjective> objective = nullptr;
  // A shorthand for the pair objective of this config (train/objectives/pairs.h), for a caller
  // that drives the step with a loss of train/preference_loss.h; conflicts with `objective`.
  const PreferenceConfig* preference = nullptr;
  // The reference when it is a model of its own (a full fine-tune's frozen copy); null: the
  // trained model with its adapters off, or the micro-batches' precomputed values.
  nn::CausalLM* reference_model = nullptr;
};

// What one optimizer step did.
struct StepResult {
  bool skipped = false;  // the loss scaler found an inf or a NaN: no update was made
  double learning_rate = 0.0;
};

// What a logging step reads (Note [Loss on the device]).
struct StepLog {
  double mean_loss = NAN;  // over the micro-batches since the last take_log; NaN for none
  double grad_norm = NAN;  // the last step's, before clipping; NaN without clipping
};

class TrainStep {
 public:
  TrainStep(nn::CausalLM& model, optim::Optimizer& optimizer, const optim::LrSchedule& schedule,
            const TrainStepOptions& options);
  ~TrainStep();
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;

  // Training step `step` (0-based; it names the ledger marks "step <step + 1> / forward",
  // "/ backward" and "/ optimizer" in the ledger of the batches' device): micro-batch m of
  // gradient_accumulation_steps comes from next(m), through the objective's step_batches.
  // The learning rate is
  // schedule.lr_at(optimizer.steps()), so a step the loss scaler skips does not advance the
  // schedule, as in the Hugging Face Trainer. Puts the model in training mode (Note
  // [Training mode] in nn/module.h).
  StepResult run(int64_t step, const std::function<MicroBatch(int64_t)>& next);

  // The mean micro-batch loss since the last call and the last step's gradient norm (Note
  // [Loss on the device]): one host read; all NaN on meta.
  StepLog take_log();
  // The objective's statistics of the micro-batches since the last call (none on meta).
  ObjectiveMetrics take_metrics();
  // The same of a pair objective (train/objectives/pairs.h) as PreferenceStats.
  PreferenceStats take_preference_stats();
  TrainObjective& objective() { return *objective_; }

 private:
  // The trained targets of every rank's micro-batches of this step (Note [Loss over trained
  // targets]), counted on `device`.
  int64_t targets_of_all_ranks(int64_t targets, Device device) const;

  nn::CausalLM& model_;
  optim::Optimizer& optimizer_;
  const optim::LrSchedule& schedule_;
  TrainStepOptions options_;
  std::vector<Tensor> params_;
  Tensor log_;  // (4) f32 on the loss's device: the loss sum, unused, the norm^2 (a double)
  int64_t losses_ = 0;
  std::shared_ptr<TrainObjective> objective_;
  ObjectiveMetrics metrics_;
  bool clipped_ = false;  // the last step wrote its norm into log_
  // While the last micro-batch's backward steps the optimizer (Note [Optimizer in
  // backward]): the optimizer, which the parameters' hooks read; else null.
  std::shared_ptr<optim::Optimizer*> in_backward_ = std::make_shared<optim::Optimizer*>(nullptr);
};

}  // namespace fitgrad::train
