// The losses of preference pairs (`fitgrad train --objective dpo|orpo`, whose objectives are
// train/objectives/dpo.h and orpo.h): the loss of a micro-batch of
// B pairs from each answer's summed negative log-likelihood under the policy (and, for DPO,
// under the reference model), with TRL's logged statistics.
//
//   DPO (Rafailov et al. 2023, "Direct Preference Optimization"), per pair, with
//   pi = log p(answer | prompt) summed over the answer's tokens, ref the same under the
//   reference and d = (pi_c - ref_c) - (pi_r - ref_r):
//     sigmoid  -(1 - e) log sigmoid(beta d) - e log sigmoid(-beta d)   (e: label smoothing, the
//              conservative DPO of Mitchell 2023; e = 0 is the paper's loss)
//     hinge    max(0, 1 - beta d)                                     (SLiC, Zhao et al. 2023)
//     ipo      (d' - 1 / (2 beta))^2, d' the same difference of per-token averages
//              (pi / n), as TRL normalizes it          (IPO, Azar et al. 2023, eq. 17)
//   ORPO (Hong et al. 2024, "ORPO: Monolithic Preference Optimization without Reference
//   Model"), with average log-probabilities a = pi / n:
//     log_odds = (a_c - a_r) - (log(1 - e^{a_c}) - log(1 - e^{a_r}))
//     loss = NLL of the chosen answers' tokens (their mean over the micro-batch)
//            - beta mean_pairs log sigmoid(log_odds)
// The micro-batch's loss is the mean of the per-pair losses (ORPO: plus the NLL term). Rewards
// as TRL logs them: DPO beta (pi - ref) of each answer, ORPO beta a; the accuracy is the share
// of pairs whose chosen reward is above the rejected one, the margin their mean difference.
//
// The terms are computed on the host in double from the 2B summed NLLs (a read of 2B floats a
// micro-batch), and so is the loss's gradient with respect to them, which the backward hands
// to autograd::sequence_nll.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "nn/decoder.h"
#include "tensor/tensor.h"
#include "train/micro_batch.h"

namespace fitgrad::train {

// Which pair loss (the objectives themselves are train/objectives/dpo.h and orpo.h).
enum class Objective { dpo, orpo };
enum class DpoLoss { sigmoid, hinge, ipo };
Objective parse_objective(std::string_view name);  // "dpo", "orpo"
DpoLoss parse_dpo_loss(std::string_view name);     // "sigmoid", "hinge", "ipo"

struct PreferenceConfig {
  Objective objective = Objective::dpo;
  DpoLoss loss_type = DpoLoss::sigmoid;
  double beta = 0.1;             // DPO's beta; ORPO's lambda
  double label_smoothing = 0.0;  // sigmoid only, in [0, 0.5)
};

// Sums over pairs, for the logged means (TRL's names in metrics_of).
struct PreferenceStats {
  int64_t pairs = 0;
  double reward_chosen = 0, reward_rejected = 0, accuracy = 0, margin = 0;
  double logps_chosen = 0, logps_rejected = 0;
  double nll = 0, log_odds_ratio = 0, log_odds_chosen = 0;  // ORPO: per micro-batch, per pair
  int64_t micro_batches = 0;
  void add(const PreferenceStats& other);
};

struct PreferenceTerms {
  double loss = 0;           // the micro-batch's loss
  std::vector<double> grad;  // (2B): d loss / d nll of each row
  PreferenceStats stats;
};

// nll: the policy's summed NLL of each row, the B chosen answers then the B rejected ones;
// ref_nll the reference's (DPO; ignored by ORPO); counts each row's trained targets (>= 1).
PreferenceTerms preference_terms(const PreferenceConfig& config, std::span<const double> nll,
                                 std::span<const double> ref_nll, std::span<const int64_t> counts);

// A loss computed on the host in double from rows' summed NLLs, nll (n) f32 (from
// autograd::sequence_nll): terms(values) gives the loss and its gradient with respect to each
// value, which a node named `name` hands back to nll. One read of n floats; on a device
// without bytes (meta) nothing is read, terms is not called, and the loss is an empty ().
Tensor host_loss_of_nll(
    const Tensor& nll, const char* name,
    const std::function<std::pair<double, std::vector<double>>(const std::vector<double>&)>& terms);

// Each answer's (row's) summed NLL under `model`: autograd::sequence_nll over its span or
// row; (2B) for B pairs.
Tensor answer_nll(const nn::CausalLM& model, const MicroBatch& batch);

// The differentiable loss () on nll's device: nll (2B) f32 from autograd::sequence_nll. On a
// device without bytes (meta) nothing is read and `stats` is left alone.
Tensor preference_loss(const Tensor& nll, const std::vector<double>& ref_nll,
                       const std::vector<int64_t>& counts, const PreferenceConfig& config,
                       PreferenceStats* stats);

// Note [Preference steps]: one micro-batch of B pairs (train/micro_batch.h): its 2B answers,
// the B chosen ones first, each a row of its own or a span of a packed row (Note [Packed
// pairs] in data/loader.h), row_targets each answer's trained targets. For DPO the reference
// pass comes first: the model with its LoRA adapters off (nn::AdaptersOff), in eval mode and
// without a gradient, so its logits are freed before the policy's forward saves anything.
// Then the policy's logits, each answer's summed NLL (autograd::sequence_nll), and the loss.
// The reference pass runs `reference` when given (a full fine-tune's frozen copy), else the
// model itself with its adapters off; the batch's ref_nll, the reference's NLL of each answer
// computed before training (--precompute_ref_log_probs), takes the pass's place.
Tensor preference_objective(nn::CausalLM& model, const MicroBatch& batch,
                            const PreferenceConfig& config, PreferenceStats* stats,
                            nn::CausalLM* reference = nullptr);

// The reference's summed NLL of each answer of the batch: the model with its adapters off, in
// eval mode, without a gradient ((2B) zeros on meta, where nothing is read).
std::vector<double> reference_nll(nn::CausalLM& model, const MicroBatch& batch);

}  // namespace fitgrad::train
