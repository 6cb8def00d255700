// GRPO's loss (`fitgrad train --objective grpo`, issue 59) as TRL 1.16's GRPOTrainer computes it:
// the advantages of each group's completions from their rewards, then the clipped-ratio loss
// of a micro-batch of completions from each token's log-probability under the policy, the
// policy that sampled them (old) and the reference, with TRL's logged statistics.
//
// Per completion b of B and token t (mask m_bt: 1 for a trained completion token), with
// A_b the advantage, lr = logp - old:
//   ratio      r_bt = exp(lr_bt)                        (importance_sampling_level token)
//              r_b  = exp(sum_t m lr / max(sum_t m, 1))  (sequence: GSPO, Zheng et al. 2025)
//   policy     P = -min(r A, clamp(r, 1 - epsilon, 1 + epsilon_high) A)   (PPO's clip; DAPO's
//              clip-higher when epsilon_high > epsilon)
//   KL (beta > 0): k3 = exp(ref - logp) - (ref - logp) - 1, times r (TRL's
//              use_bias_correction_kl, on by default); per-token loss P + beta k3 r
//   loss       grpo     mean_b (sum_t m L / max(sum_t m, 1))
//              bnpo     sum m L / max(sum m, 1)
//              dr_grpo  sum m L / (B max_completion_length)       (Dr. GRPO, Liu et al. 2025)
//              dapo     sum m L / (max(N, 1) / steps_per_generation), N the trained tokens of
//                       the whole generation batch (DAPO, Yu et al. 2025)
// The value is one micro-batch's loss before the step's 1 / accumulation weighting (TRL's
// loss times its gradient accumulation steps), so a TrainStep that weighs each micro-batch by
// 1 / accumulation trains as TRL does with steps_per_generation = gradient_accumulation_steps
// (its default). The caller handles num_iterations: it keeps the old log-probabilities of a
// generation batch and passes them on each reuse (none: on-policy, old = logp detached).
//
// Note [GRPO's terms on the host]
// The loss, its gradient with respect to each token's log-probability and the statistics
// are computed on the host in double from the B T log-probabilities read once (a host read
// of the micro-batch's completion tokens, Note [Host reads] in tensor/host_reads.h), and the
// backward hands that (B, T) gradient to the fused head's op (autograd::
// chunked_head_token_logprobs), the pattern of train/preference_loss.h. Why not autograd
// ops: the loss is a few elementwise terms per token with branches (the clip, the min, the
// masked means, the sequence ratio's sum), which as tensor ops would be a dozen (B, T)
// tensors of the step's ledger and a min/clamp backward to match torch's tie rules; the
// (B, T) values are small next to the logits the op never builds, the old and reference
// log-probabilities are already on the host, and doubles make the result equal TRL's fp64
// goldens to rounding. torch's ties are kept: where r A = clamp(r) A the gradient splits in
// half between the two (torch.min's rule), and clamp passes it at its bounds.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "tensor/tensor.h"

namespace fitgrad::train {

enum class GrpoLossType { grpo, bnpo, dr_grpo, dapo };
enum class ImportanceSampling { token, sequence };
enum class RewardScaling { group, batch, none };
GrpoLossType parse_grpo_loss_type(std::string_view name);             // grpo, bnpo, dr_grpo, dapo
ImportanceSampling parse_importance_sampling(std::string_view name);  // token, sequence
RewardScaling parse_reward_scaling(std::string_view name);            // group, batch, none

// TRL 1.16's GRPOConfig defaults.
struct GrpoConfig {
  GrpoLossType loss_type = GrpoLossType::dapo;
  double epsilon = 0.2;
  std::optional<double> epsilon_high;  // none: epsilon
  double beta = 0.0;
  bool kl_bias_correction = true;  // TRL's use_bias_correction_kl
  ImportanceSampling importance_sampling_level = ImportanceSampling::token;
  RewardScaling scale_rewards = RewardScaling::group;
  bool mask_truncated_completions = false;
  int64_t num_generations = 8;          // G: completions per prompt
  int64_t max_completion_length = 512;  // also dr_grpo's constant
  std::vector<double> reward_weights;   // one per reward function; empty: all 1
};

// The advantages of B = prompts x G completions, grouped G by G in order, and the logged
// reward statistics (TRL's names in the comments).
struct GrpoAdvantages {
  std::vector<double> advantages;                   // (B)
  double reward_mean = 0, reward_std = 0;           // reward, reward_std: the weighted sum's
  double frac_reward_zero_std = 0;                  // frac_reward_zero_std
  std::vector<double> function_mean, function_std;  // rewards/<name>/mean, /std, per function
};

// rewards (B, K) row-major, K = functions; NaN where a function gave no reward (a completion
// that none scored gets advantage 0). sum_then_normalize: each completion's reward is
// sum_k w_k r_k, minus its group's mean, divided by std + 1e-4 where std is the group's
// (group) or the batch's (batch) sample standard deviation, or not divided (none).
GrpoAdvantages grpo_advantages(const GrpoConfig& config, std::span<const double> rewards,
                               int64_t functions);

// The loss mask of B completions of T positions (B, T): each completion's token mask, zero
// for a truncated one (no end-of-turn id before the length limit) under
// mask_truncated_completions.
std::vector<double> grpo_loss_mask(const GrpoConfig& config, std::span<const double> mask,
                                   const std::vector<bool>& truncated);

// One micro-batch's values as TRL logs them (each a mean over the micro-batch; NaN where it
// has none); the logger averages them over the micro-batches of a logging step.
struct GrpoStats {
  double clip_low_mean = 0, clip_high_mean = 0, clip_region_mean = 0;  // clip_ratio/*_mean
  double clip_low_min = 0, clip_high_max = 0;  // clip_ratio/low_min, /high_max
  double kl = 0;                               // kl (beta > 0; else NaN)
  double entropy = 0;                          // entropy (NaN without entropies)
};

// A micro-batch's inputs on the host, each (B, T) row-major unless said.
struct GrpoInputs {
  int64_t rows = 0, cols = 0;          // B, T
  std::span<const double> old_logp;    // empty: on-policy (old = logp)
  std::span<const double> ref_logp;    // needed when beta > 0
  std::span<const double> mask;        // grpo_loss_mask's
  std::span<const double> advantages;  // (B)
  std::span<const double> entropy;     // may be empty (the entropy statistic is then NaN)
  double num_items_in_batch = 0;       // dapo: trained tokens of the generation batch
  int64_t steps_per_generation = 1;    // dapo: micro-batches of the generation batch
};

struct GrpoTerms {
  double loss = 0;
  std::vector<double> grad;  // (B, T): d loss / d logp
  GrpoStats stats;
};

// The loss, its gradient and statistics from the policy's log-probabilities logp (B, T).
GrpoTerms grpo_terms(const GrpoConfig& config, std::span<const double> logp,
                     const GrpoInputs& inputs);

// The differentiable loss () on logp's device: logp (B, T) f32 from
// nn::CausalLM::token_logprobs (Note [GRPO's terms on the host]). On a device without bytes
// (meta) nothing is read and `stats` is left alone.
Tensor grpo_loss(const Tensor& logp, const GrpoInputs& inputs, const GrpoConfig& config,
                 GrpoStats* stats);

}  // namespace fitgrad::train
