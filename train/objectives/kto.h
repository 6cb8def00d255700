// Kahneman-Tversky Optimization (`--objective kto`, TRL 1.16's KTOTrainer; Ethayarajh et al.
// 2024, "KTO: Model Alignment as Prospect Theoretic Optimization") on unpaired examples
// {prompt, completion, label} (data/sft_formats.h, unpaired_preference), against a reference
// as DPO's (the adapter off, a frozen copy, or --precompute_ref_log_probs). Per micro-batch of
// B examples, with pi = log p(completion | prompt) summed over the completion's tokens, ref the
// same under the reference and r = pi - ref:
//   kl = max(0, mean over the batch of (pi' - ref')), the same of the mismatched rows (Note
//        [KTO's mismatched completions]), detached (no gradient flows through it);
//   desirable (label true):    loss_i = desirable_weight   (1 - sigmoid(beta (r - kl)))
//   undesirable (label false): loss_i = undesirable_weight (1 - sigmoid(beta (kl - r)))
//   loss = the mean of loss_i over the B examples.
// --loss_type apo_zero_unpaired (APO-zero's unpaired form; D'Oosterlinck et al. 2024,
// "Anchored Preference Optimization") drops kl: desirable 1 - sigmoid(beta r), undesirable
// sigmoid(beta r). Logged as TRL logs them, each a
// mean over the micro-batches that have such examples: kl, rewards/chosen and
// rewards/rejected (beta r of the desirable, undesirable examples), logps/chosen and
// logps/rejected (their pi), rewards/margins (chosen minus rejected, where a micro-batch has
// both). TRL's entropy, logits/* and num_tokens are not logged.
//
// Note [KTO's mismatched completions]
// The KL estimate reads each prompt with another example's completion, as TRL builds its KL
// dataset: the examples of each split, in their order, are cut into chunks of
// --per_device_train_batch_size, and in each chunk example i takes the completion of example
// i - 1 (the first the last's): (x1, yn), (x2, y1), ... Each example is laid out as a pair of
// rows (data::layout_pairs): its own completion, then the mismatched one, so that a micro-batch
// of B examples holds 2B answers, the B matched ones first, each with its trained-target count
// and span (Note [Preference batches] in data/loader.h) and the B labels (MicroBatch::labels).
// The mismatched rows run through the policy's forward with the rest and get a zero gradient.
// TRL reads the mismatched completions of a batch's own examples when the batches are drawn in
// order (it requires sequential sampling); with --data_order random the chunks still pair
// every prompt with a completion of another example, drawn with it from the data. Under data
// parallelism the kl of each rank's micro-batch is its own (TRL averages the ranks' first).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "train/objectives/objective.h"
#include "train/train_args.h"

namespace fitgrad::train {

enum class KtoLoss { kto, apo_zero_unpaired };
KtoLoss parse_kto_loss(std::string_view name);  // "kto", "apo_zero_unpaired"

struct KtoConfig {
  KtoLoss loss_type = KtoLoss::kto;
  double beta = 0.1;
  double desirable_weight = 1.0;
  double undesirable_weight = 1.0;
};

struct KtoTerms {
  double loss = 0;           // the micro-batch's loss
  std::vector<double> grad;  // (2B): d loss / d nll of each row (0 for the mismatched rows)
  double kl = 0;             // the clamped KL estimate
  ObjectiveMetrics metrics;  // TRL's names
};

// nll: the policy's summed NLL of each row, the B examples' own completions then the B
// mismatched ones; ref_nll the reference's; labels each example's (true: desirable).
KtoTerms kto_terms(const KtoConfig& config, std::span<const double> nll,
                   std::span<const double> ref_nll, std::span<const uint8_t> labels);

class KtoObjective : public TrainObjective {
 public:
  explicit KtoObjective(const KtoConfig& config) : config_(config) {}
  std::string name() const override { return "kto"; }
  ObjectiveData data() const override { return ObjectiveData::unpaired; }
  ObjectiveReference reference() const override { return ObjectiveReference::model; }
  Tensor loss(nn::CausalLM& model, const MicroBatch& batch, const LossContext& context) override;
  // The B labels a micro-batch carries (all desirable: a plan reads none).
  void plan_batch(MicroBatch& batch, int64_t examples) const override;
  std::string eval_summary(const ObjectiveMetrics& metrics) const override;

 private:
  KtoConfig config_;
};

// Checks --loss_type (kto by default), --desirable_weight, --undesirable_weight and the batch
// (TRL's: the KL estimate needs at least 2 examples a batch).
std::unique_ptr<TrainObjective> make_kto(const TrainArgs& a);

}  // namespace fitgrad::train
