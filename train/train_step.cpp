// One optimizer step over its micro-batches (see train_step.h).
#include "train/train_step.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <exception>
#include <optional>
#include <utility>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/autocast_cache.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "optim/clip.h"
#include "tensor/error.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/memory/scope.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/optim_update.h"
#include "train/activation_offload.h"
#include "train/objectives/pairs.h"
#include "train/objectives/sft.h"

namespace fitgrad::train {

TrainStep::TrainStep(nn::CausalLM& model, optim::Optimizer& optimizer,
                     const optim::LrSchedule& schedule, const TrainStepOptions& options)
    : model_(model), optimizer_(optimizer), schedule_(schedule), options_(options) {
  FG_CHECK(options.gradient_accumulation_steps >= 1,
           "[train step] gradient_accumulation_steps must be >= 1, got {}",
           options.gradient_accumulation_steps);
  FG_CHECK(options.max_grad_norm >= 0, "[train step] max_grad_norm must be >= 0, got {}",
           options.max_grad_norm);
  for (auto& [name, p] : model.named_parameters()) params_.push_back(p);
  FG_CHECK(int(bool(options.objective)) + int(bool(options.preference)) +
                   int(options.weight_by_targets) <=
               1,
           "[train step] an objective, a preference config and weight_by_targets conflict: give "
           "one");
  objective_ = options.objective           ? options.objective
               : options.preference        ? std::make_shared<PairObjective>(*options.preference)
               : options.weight_by_targets ? std::make_shared<SftObjective>()
                                           : causal_lm_objective();
  FG_CHECK(!(options.offload && options.optimizer_in_backward),
           "[train step] optimizer offload and optimizer-in-backward conflict: the offloaded "
           "update runs on the host after the backward");
  FG_CHECK(!(options.ddp && options.optimizer_in_backward),
           "[train step] optimizer-in-backward cannot run under data parallelism: a gradient is "
           "final only once its bucket is averaged across the ranks");
  FG_CHECK(!options.zero || (options.ddp && !options.offload),
           "[train step] ZeRO needs data parallelism and cannot offload the optimizer");
  FG_CHECK(!options.zero || options.zero->stage() < 2 || !options.scaler,
           "[train step] ZeRO stage 2 cannot run fp16's loss scaler: its overflow check would see "
           "only this rank's share of the gradients");
  if (!options.optimizer_in_backward) return;
  FG_CHECK(options.max_grad_norm == 0,
           "[train step] optimizer-in-backward cannot clip by the global norm (max_grad_norm {}): "
           "every gradient would be needed before the first update; set it to 0",
           options.max_grad_norm);
  FG_CHECK(!options.scaler,
           "[train step] optimizer-in-backward cannot take the loss scaler's skip decision "
           "(fp16): it needs every gradient before the first update");
  // The hooks outlive this TrainStep (they stay on the parameters): they reach the optimizer
  // only while a step of this TrainStep is in its backward.
  // Frozen parameters (a LoRA base) get no gradient and are not the optimizer's. A hook
  // reaches its parameter's gradient through a weak pointer: a hook holding the parameter
  // itself would keep it alive from its own autograd data, a cycle that leaked the model.
  for (auto& entry : model.named_parameters()) {
    if (!autograd::requires_grad(entry.second)) continue;
    const size_t index = optimizer.index_of(entry.first);
    std::weak_ptr<autograd::AutogradMeta> meta = autograd::shared_meta_of(entry.second);
    autograd::add_grad_hook(entry.second, [active = in_backward_, index, meta](
                                              const Tensor&, const autograd::GradHookContext& c) {
      if (!c.is_last_micro_batch || !*active) return;
      (*active)->step_param(index);
      if (const auto m = meta.lock()) m->grad = Tensor();
    });
  }
}

TrainStep::~TrainStep() { *in_backward_ = nullptr; }

namespace {

// Note [A failed step leaves nothing behind]
// An exception inside a step (out of memory, most often) unwinds out of the forward or the
// backward with the tape still holding its nodes and their saved activations, and with
// gradients half accumulated. A caller that catches it and goes on in the same process
// (memplan's search plans candidate after candidate; a batch-size finder retries a smaller
// batch) must get that memory back, so the step clears the tape and the gradients while
// the exception passes. Without this, a plan after an out-of-memory plan started with the
// failed plan's 19 GiB still allocated.
class ClearOnThrow {
 public:
  ClearOnThrow(nn::CausalLM& model, std::shared_ptr<optim::Optimizer*> in_backward,
               dist::GradBuckets* ddp)
      : model_(model), in_backward_(std::move(in_backward)), ddp_(ddp) {}
  ~ClearOnThrow() {
    if (std::uncaught_exceptions() <= exceptions_) return;
    if (ddp_) ddp_->disarm();
    autograd::current_tape().clear();
    *in_backward_ = nullptr;
    model_.zero_grad();
  }
  ClearOnThrow(const ClearOnThrow&) = delete;
  ClearOnThrow& operator=(const ClearOnThrow&) = delete;

 private:
  nn::CausalLM& model_;
  std::shared_ptr<optim::Optimizer*> in_backward_;
  dist::GradBuckets* ddp_;
  int exceptions_ = std::uncaught_exceptions();
};

}  // namespace

int64_t TrainStep::targets_of_all_ranks(int64_t targets, Device device) const {
  dist::ProcessGroup& group = *options_.targets_group;
  Tensor count;
  {
    const MemoryContextScope scope({Category::other, intern_label("train.targets")});
    count = Tensor::full({1}, double(targets), DType::i64, device);
  }
  group.all_reduce(count, dist::ReduceOp::sum);
  // A dry run reads no count; its weights scale as the run's do, whatever their values.
  return device.has_bytes() ? int64_t(count.item()) : targets * group.size();
}

StepResult TrainStep::run(int64_t step, const std::function<MicroBatch(int64_t)>& records) {
  const int64_t accum = options_.gradient_accumulation_steps;
  // Note [Objectives as units]: the objective's phase before the micro-batches, if it has one.
  const MicroBatches next = objective_->step_batches(model_, step, accum, records);
  const ClearOnThrow clear_on_throw(model_, in_backward_, options_.ddp);
  StepResult result;
  clipped_ = false;
  result.learning_rate = schedule_.lr_at(optimizer_.steps());
  optimizer_.set_lr(result.learning_rate);
  // Each micro-batch's loss is divided by the accumulation and, with fp16, multiplied by
  // the loss scale (Note [Dynamic loss scaling]).
  const double loss_factor =
      (options_.scaler ? double(options_.scaler->scale()) : 1.0) / double(accum);
  // Note [Loss over trained targets]
  // The cross-entropy of a micro-batch is the mean over its trained targets. Instruction data
  // leaves micro-batches different numbers of them, and the mean of the means would weigh a
  // target of a short example above one of a long example (the gradient-accumulation bug
  // transformers fixed in 4.46 with num_items_in_batch). For an objective that weighs by
  // trained targets (SFT's, train/objectives/sft.h) the step
  // takes its micro-batches first and weighs micro-batch m by accum n_m / N, n_m its trained
  // targets and N the step's: the loss is then the mean over every trained target of the
  // accumulated batch, as one batch of them all would give, and so is the logged loss. Under
  // data parallelism N counts the targets of every rank's micro-batches (one all-reduce of a
  // count) and the weight is W accum n_m / N for W ranks: the ranks' gradients are averaged,
  // and so are their logged losses, which gives the mean over the global batch's targets.
  std::vector<MicroBatch> taken;
  int64_t step_targets = 0;
  const int64_t ranks = options_.targets_group ? options_.targets_group->size() : 1;
  if (objective_->weighs_by_targets()) {
    for (int64_t m = 0; m < accum; ++m) {
      taken.push_back(next(m));
      step_targets += taken.back().trained_targets;
    }
    if (ranks > 1) step_targets = targets_of_all_ranks(step_targets, taken[0].ids.device());
    FG_CHECK(step_targets > 0, "[train step] step {} has no trained target in its {} micro-batches",
             step + 1, accum * ranks);
  }
  model_.train();  // dropout on (Note [Training mode] in nn/module.h)
  CachingAllocator* alloc = nullptr;
  {
    // Held across backward too: a checkpointed segment recomputes under the same mode. The
    // cache makes each weight's compute-dtype copy once for all the micro-batches and ends
    // before the optimizer changes the weights (Note [Autocast weight cache]).
    autograd::AutocastGuard autocast(options_.compute_dtype);
    autograd::AutocastCacheScope weight_cache;
    const bool weighted = !taken.empty();
    for (int64_t m = 0; m < accum; ++m) {
      MicroBatch batch = taken.empty() ? next(m) : std::move(taken[size_t(m)]);
      // The micro-batch's weight relative to 1 / accum (1 for an objective that does not weigh by targets).
      const double weight =
          weighted ? double(ranks * accum) * double(batch.trained_targets) / double(step_targets)
                   : 1.0;
      alloc = &allocator_for(batch.ids.device());
      alloc->mark(fmt::format("step {} / forward", step + 1));
      Tensor loss;
      // Note [Offload overlaps with one block in flight]: it lives until the backward is done.
      std::optional<ActivationOffload> offload;
      if (options_.offload_activations) offload.emplace(batch.ids.device());
      {
        std::optional<autograd::SavedTensorHooksScope> hooks;
        if (offload) hooks.emplace(offload->hooks());
        loss = objective_->loss(model_, batch, {options_.reference_model, &metrics_});
        FG_CHECK(loss.defined() && loss.dim() == 0,
                 "[train step] the objective {} must return a scalar loss, got {}",
                 objective_->name(),
                 loss.defined() ? shape_str(loss.shape()) : "an undefined tensor");
        if (offload) offload->end_forward();
      }
      {
        autograd::NoGradGuard no_grad;
        if (!log_.defined()) {
          const MemoryContextScope scope({Category::other, intern_label("train.log")});
          log_ = ops::zero_doubles(2, loss.device());
        }
        Tensor sum = log_.narrow(0, 0, 1).reshape({});  // a view of the loss sum
        // Weighted steps scale whatever the weight, so that a dry run's ops are the run's.
        ops::add_(sum, weighted ? ops::scale(loss, weight) : loss);
        ++losses_;
      }
      const double factor = loss_factor * weight;
      Tensor scaled = loss;
      if (weighted || factor != 1.0) {
        const LabelScope label("loss");
        scaled = autograd::scale(loss, factor);
      }
      alloc->mark(fmt::format("step {} / backward", step + 1));
      const autograd::MicroBatchScope micro_batch(m, m == accum - 1);
      if (options_.optimizer_in_backward && m == accum - 1) {
        alloc->mark(fmt::format("step {} / backward + optimizer", step + 1));
        optimizer_.begin_step();
        *in_backward_ = &optimizer_;
      }
      if (options_.ddp && m == accum - 1) options_.ddp->arm();
      autograd::backward(scaled);
    }
  }
  if (options_.ddp) options_.ddp->finish();  // Note [DDP buckets]: the averaged gradients
  if (*in_backward_) {
    *in_backward_ = nullptr;
    optimizer_.end_step();
    model_.zero_grad();  // parameters the backward did not reach
    return result;
  }
  alloc->mark(fmt::format("step {} / optimizer", step + 1));
  if (options_.scaler) {
    const LabelScope label("loss_scaler");
    result.skipped = options_.scaler->unscale_and_check(params_);
  }
  clipped_ = options_.max_grad_norm > 0 && log_.defined();
  if (clipped_) {
    Tensor norm_sq = log_.narrow(0, 2, 2);  // one double
    norm_sq.fill_(0.0);
    dist::ZeroSharding* zero = options_.zero;
    const LabelScope label("clip_grad_norm");
    optim::clip_grad_norm_(
        params_, options_.max_grad_norm, norm_sq,
        zero ? std::function<void(const Tensor&)>([zero](const Tensor& s) { zero->reduce_norm(s); })
             : nullptr);
  }
  if (!result.skipped) {
    // Note [Optimizer offload]: the gradients go to the host masters, which step there.
    if (options_.offload) options_.offload->pull_grads();
    if (options_.zero)
      options_.zero->step();  // Note [ZeRO by whole parameters]
    else
      optimizer_.step();
    if (options_.offload) options_.offload->push_params();
  }
  if (options_.scaler) options_.scaler->update(result.skipped);
  model_.zero_grad();
  return result;
}

ObjectiveMetrics TrainStep::take_metrics() { return std::exchange(metrics_, {}); }

PreferenceStats TrainStep::take_preference_stats() { return preference_stats_of(take_metrics()); }

StepLog TrainStep::take_log() {
  StepLog log;
  if (!log_.defined() || !log_.device().has_bytes()) {
    losses_ = 0;
    return log;
  }
  const Tensor host = log_.read_host("train.log");  // the one read of a logging step
  if (losses_ > 0) log.mean_loss = double(host.data<float>()[0]) / double(losses_);
  if (clipped_) {
    double norm_sq = 0.0;
    std::memcpy(&norm_sq, host.data<float>() + 2, sizeof(norm_sq));
    log.grad_norm = std::sqrt(norm_sq);
  }
  autograd::NoGradGuard no_grad;
  log_.narrow(0, 0, 1).fill_(0.0);
  losses_ = 0;
  return log;
}

}  // namespace fitgrad::train
