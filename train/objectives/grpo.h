// GRPO's objective (issue 59; TRL 1.16's GRPOTrainer, Shao et al. 2024 "DeepSeekMath", with
// DAPO's, Dr. GRPO's, BNPO's and GSPO's variants): the loss of a micro-batch of sampled
// completions from their advantages, each completion token's log-probability through the
// fused head (nn::CausalLM::token_logprobs at the sampling temperature), and the old
// policy's and the reference's (train/objectives/grpo_loss.h), with TRL's statistics.
//
// What this file has: the micro-batch's GRPO data, the objective (loss, metrics, the dry
// run's batch, and step_batches, which hands out the micro-batches of a generation batch that
// grpo_generation.h makes: sampling, rewards, advantages, rows, old and reference
// log-probabilities), and the factory of `--objective grpo` from its flags. The run reads
// its prompt records and starts its sampling in train/train_grpo.cpp.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "train/objectives/grpo_generation.h"
#include "train/objectives/grpo_loss.h"
#include "train/objectives/objective.h"
#include "train/train_args.h"

namespace fitgrad::train {

// One micro-batch's GRPO data, on the (B, L) grid of its rows (Note [GRPO rows]).
struct GrpoMicroBatch {
  std::vector<double> advantages;    // (B)
  std::vector<double> old_logp;      // (B, L); empty: on-policy (the logp of this pass)
  std::vector<double> ref_logp;      // (B, L); empty without the KL term (beta 0)
  std::vector<double> mask;          // (B, L): grpo_rows' loss mask
  double num_items_in_batch = 0;     // dapo: trained tokens of the whole generation batch
  int64_t steps_per_generation = 1;  // dapo: micro-batches of the generation batch
  // The loss's inputs for rows x length (B, L), the entropies given.
  GrpoInputs inputs(int64_t rows, int64_t length, std::span<const double> entropy) const;
};

// What step_batches samples with (Note [GRPO steps]).
struct GrpoSampling {
  GrpoGenerationSettings settings;  // settings.config is the objective's
  rewards::RewardFunctions functions;
  const data::Tokenizer* tokenizer = nullptr;  // decodes the completions' text (may be null)
  nn::CausalLM* reference_model = nullptr;     // null: the model with its adapters off
  uint64_t seed = 0;                           // of the completions' draws
  // The prompts of generation batch n (0-based), per_device_train_batch_size x
  // gradient_accumulation_steps / num_generations of them.
  std::function<std::vector<GrpoPrompt>(int64_t n)> prompts;
};

// Note [GRPO steps]
// With sampling set, step_batches makes generation batch n = step / num_iterations at the
// first step of each n (or at the first step a run takes, resumed in the middle of one) with
// grpo_generation, its micro-batches the step's gradient_accumulation_steps, and hands them
// to the step and to the next num_iterations - 1 steps (TRL's reuse of a generation batch:
// its old log-probabilities are the sampling policy's). The generation's statistics go to
// the metrics of the first micro-batch's loss after it. Without sampling the loader's
// micro-batches, which must carry their GRPO data, pass on (a dry run's plan batches).
// Generation batch n draws from offset n P G max_completion_length of the seed's stream (P
// prompts, each generate_groups call reserving P G max_completion_length draws), set before
// it is made: a run resumed at the first step of batch n draws what the whole run drew there,
// whatever the generator held. A run resumed in the middle of a reused batch (num_iterations
// > 1, a checkpoint at a step that is not a multiple of it) samples that batch again from the
// resumed weights, where the whole run trained on the batch sampled before (TRL keeps no
// generation batch in its checkpoints either).
class GrpoObjective : public TrainObjective {
 public:
  // temperature: the sampling temperature, which TRL's log-probabilities divide the logits by.
  GrpoObjective(const GrpoConfig& config, double temperature);
  std::string name() const override { return "grpo"; }
  ObjectiveData data() const override { return ObjectiveData::prompts; }
  ObjectiveReference reference() const override;
  bool needs_row_log_probs() const override { return false; }
  Tensor loss(nn::CausalLM& model, const MicroBatch& batch, const LossContext& context) override;
  void plan_batch(MicroBatch& batch, int64_t examples) const override;
  MicroBatches step_batches(nn::CausalLM& model, int64_t step, int64_t micro_batches,
                            MicroBatches records) override;
  const GrpoConfig& config() const { return config_; }
  // Samples each step's completions (Note [GRPO steps]).
  void sample_with(GrpoSampling sampling);
  // The last generation batch (null before the first) and its prompts.
  const GrpoGeneration* last_generation() const { return generation_ ? &*generation_ : nullptr; }
  const std::vector<GrpoPrompt>& last_prompts() const { return prompts_; }

 private:
  GrpoConfig config_;
  double temperature_;
  std::optional<GrpoSampling> sampling_;
  Generator generator_;  // the completions' draws, from sampling_'s seed
  std::optional<GrpoGeneration> generation_;
  std::vector<GrpoPrompt> prompts_;  // generation_'s
  int64_t generation_index_ = -1;    // the batch generation_ holds
  ObjectiveMetrics pending_;         // its statistics, not yet logged
};

// `--objective grpo`'s configuration from the run's flags (TRL 1.16 GRPOConfig's names and
// defaults: loss_type dapo, epsilon_high epsilon, beta as objective_beta gave it), each flag
// checked: at least 2 generations, dividing the step's completions (per-device batch x
// accumulation) and --generation_batch_size; a reward given (--reward_funcs or
// --reward_command), one weight per reward.
GrpoConfig grpo_config(const TrainArgs& a);
// --reward_funcs, then --reward_command (train/rewards/reward_funcs.h).
rewards::RewardFunctions grpo_reward_functions(const TrainArgs& a);
// The objective of grpo_config(a); the run starts its sampling (train/train_grpo.cpp).
std::unique_ptr<TrainObjective> make_grpo(const TrainArgs& a);

// TRL's names for GrpoStats (clip_ratio/low_mean, ..., kl, entropy), one value per
// micro-batch (a statistic the micro-batch has none of, NaN, is left out).
void add_grpo_metrics(ObjectiveMetrics& metrics, const GrpoStats& stats);

}  // namespace fitgrad::train
