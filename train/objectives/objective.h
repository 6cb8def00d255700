// What a training step optimizes: an objective, the one interface that `fitgrad train
// --objective NAME` (train/objectives/registry.h), the benchmarks, the planner and a program
// of its own (examples/custom_objective.cpp) hand to train::TrainStep (train/train_step.h).
// The step runs exactly one objective; without one it runs the causal LM's cross-entropy.
//
// Note [Objectives as units]
// Each objective is one file under train/objectives/ (causal_lm, sft, dpo, orpo, kto, grpo; their
// shared pair loss in train/preference_loss.h), and it owns:
//   - the records it reads and the batch it builds: data() says which records (text and
//     instruction data, preference pairs, unpaired labelled examples) and so how the data
//     layer lays them out (train/train_sft.cpp), and how many rows an example takes;
//   - whether it needs a reference: reference() (the model with its LoRA adapters off, a full
//     fine-tune's frozen copy, or the values --precompute_ref_log_probs computed before
//     training, which the run attaches to each micro-batch as MicroBatch::ref_nll);
//   - its loss and its statistics: loss(), which adds what it logs to an ObjectiveMetrics;
//   - its metrics: named as TRL logs them, into metrics.jsonl and TensorBoard as they are
//     (the evaluation's with the prefix eval_), summed over the ranks of a job;
//   - the shapes it adds to a plan: plan_batch(), what a dry run's meta micro-batch carries
//     besides its ids and targets (Note [Dry run on meta] in train/train_run.h);
//   - a phase before the step's micro-batches, when it needs one: step_batches() turns the
//     loader's micro-batches of a step into the step's, with the model at hand (an objective
//     that samples completions from the model, scores them and computes their old and
//     reference log-probabilities does that there, once per step or per reuse of a
//     generation batch). The default passes the loader's micro-batches on.
//
// Note [Adding an objective]
// 1. Its file, train/objectives/<name>.{h,cpp}: a class derived from TrainObjective and a
//    factory `std::unique_ptr<TrainObjective> make_<name>(const TrainArgs&)` that checks the
//    flags it reads, with a header paragraph naming the published definition it follows.
// 2. One registration line in train/objectives/registry.cpp (beside the include of its
//    header): its name for --objective, the records it reads, the factory, the flags only it
//    reads. --objective's accepted values and help come from there; a run of another
//    objective refuses those flags.
// 3. Its flags, if it has its own, in the flag table (train/train_flags.cpp, Note [One flag
//    table]) and TrainArgs (train/train_args.h).
// 4. Its tests: the loss and its gradient against golden data from the reference library,
//    made by a committed generator under tests/golden/ (tests/golden/gen_kto_golden.py and
//    tests/train/objectives/kto_test.cpp are an example), and a tiny run that learns.
// New records need the data layer too (data/sft_formats.h: their fields and errors).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "nn/decoder.h"
#include "tensor/tensor.h"
#include "train/micro_batch.h"

namespace fitgrad::train {

// An objective's logged statistics: for each name a sum and a count, the logged value being
// their quotient. A statistic a micro-batch did not have (a KTO batch without an undesirable
// example) is added with a count of 0, so that every rank of a job holds the same names.
class ObjectiveMetrics {
 public:
  void add(const std::string& name, double sum, double count = 1.0);
  void merge(const ObjectiveMetrics& other);
  bool empty() const { return sums_.empty(); }
  // The sum and the count of `name` ({0, 0} when absent).
  std::pair<double, double> at(const std::string& name) const;
  // name -> sum / count, for the names with a count above 0.
  std::map<std::string, double> means() const;
  // Every (sum, count) in name order, for a reduction across ranks.
  std::map<std::string, std::pair<double, double>>& sums() { return sums_; }

 private:
  std::map<std::string, std::pair<double, double>> sums_;
};

// The records an objective reads (Note [Objectives as units]).
enum class ObjectiveData {
  tokens,    // text, or instruction and chat data: one example, its trained tokens
  pairs,     // preference pairs {prompt, chosen, rejected}: two rows, the chosen one first
  unpaired,  // labelled examples {prompt, completion, label}: the example's row and a
             // mismatched one (Note [KTO's mismatched completions] in kto.h)
  prompts,   // prompts {prompt, the rewards' columns} (train/grpo_prompts.h): the objective
             // samples its completions in step_batches, and its rows are theirs
};

// Whether an objective compares the policy with a reference model.
enum class ObjectiveReference { none, model };

// Micro-batch m of a step.
using MicroBatches = std::function<MicroBatch(int64_t)>;

struct LossContext {
  // The reference when it is a model of its own (a full fine-tune's frozen copy); null: the
  // trained model with its adapters off, or the micro-batch's precomputed ref_nll.
  nn::CausalLM* reference = nullptr;
  ObjectiveMetrics* metrics = nullptr;  // where the statistics go; null: nowhere
};

class TrainObjective {
 public:
  virtual ~TrainObjective() = default;
  virtual std::string name() const = 0;
  virtual ObjectiveData data() const { return ObjectiveData::tokens; }
  virtual ObjectiveReference reference() const { return ObjectiveReference::none; }
  // Rows a training example takes in a micro-batch (a dry run's meta batch has as many): one
  // for tokens, two for pairs and unpaired examples (their two answers).
  virtual int64_t rows_per_example() const {
    return data() == ObjectiveData::pairs || data() == ObjectiveData::unpaired ? 2 : 1;
  }
  // Each micro-batch's loss weighs by its share of the step's trained targets (Note [Loss
  // over trained targets] in train/train_step.cpp): a mean over tokens of instruction data.
  // False: each micro-batch weighs 1 / accumulation (a mean over examples, or over equal
  // windows of text).
  virtual bool weighs_by_targets() const { return false; }
  // Whether the loss is a mean cross-entropy of tokens, whose evaluation reports perplexity.
  virtual bool is_cross_entropy() const { return false; }
  // Whether the loss reads each row's summed log-probability (no fused mean cross-entropy
  // head, --fused_head_loss).
  virtual bool needs_row_log_probs() const { return !is_cross_entropy(); }

  // The step's micro-batches from the loader's (`records`), before the first forward of step
  // `step` (0-based) of `micro_batches` micro-batches (Note [Objectives as units]).
  virtual MicroBatches step_batches(nn::CausalLM& model, int64_t step, int64_t micro_batches,
                                    MicroBatches records);
  // The loss () of one micro-batch, a scalar whose graph reaches the trained parameters; runs
  // under the step's autocast, and in evaluation without a gradient.
  virtual Tensor loss(nn::CausalLM& model, const MicroBatch& batch, const LossContext& context) = 0;
  // What a dry run's meta micro-batch of `examples` examples carries besides its ids, targets
  // and row target counts (the run adds the precomputed reference values).
  virtual void plan_batch(MicroBatch& batch, int64_t examples) const;
  // The evaluation's line after "validation loss L" (the run adds perplexity for
  // cross-entropy objectives), from its metrics; "" for none.
  virtual std::string eval_summary(const ObjectiveMetrics& metrics) const;
};

// The library's default: the mean cross-entropy of the micro-batch's targets (causal_lm.h).
std::shared_ptr<TrainObjective> causal_lm_objective();

}  // namespace fitgrad::train
