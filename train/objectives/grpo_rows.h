// The rows of a GRPO micro-batch: each completion after its prompt, on one (B, L) grid, and
// the per-position log-probabilities of its completion tokens without a gradient (the old
// policy's and the reference's, train/objectives/grpo_loss.h).
//
// Note [GRPO rows]
// Row b holds prompt b then completion b, right-padded with pad_id to L = max_b (P_b + T_b);
// position j's target is token j + 1 where that is a completion token, else -100. A causal
// model's positions do not see the padding after them, so no attention mask is needed, and
// prompts of different lengths need no left padding (TRL left-pads them behind an attention
// mask; the completion tokens' log-probabilities are the same). The loss reads the (B, L)
// grid as it is: every GRPO term is per token under the mask, or a masked sum over a row, so
// the completions need not be aligned column by column. A completion's tokens include the
// stop token that ended it, as TRL's completion mask does; a truncated one has none.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/decoder.h"
#include "tensor/tensor.h"
#include "train/objectives/grpo_loss.h"

namespace fitgrad::train {

struct GrpoRows {
  Tensor ids;                    // (B, L) i64
  Tensor targets;                // (B, L) i64: -100 except before a completion token
  std::vector<double> mask;      // (B, L): the loss mask (grpo_loss_mask over the targets)
  int64_t rows = 0, length = 0;  // B, L
};

// prompts[b] and completions[b] of B completions (prompts non-empty), on `device`.
// truncated[b]: completion b ended at the length limit (grpo_loss_mask drops it under
// mask_truncated_completions).
GrpoRows grpo_rows(const std::vector<std::vector<int32_t>>& prompts,
                   const std::vector<std::vector<int32_t>>& completions,
                   const std::vector<bool>& truncated, const GrpoConfig& config, int64_t pad_id,
                   Device device = Device::cpu());

// Each position's log-probability of its target at `temperature` (B L), 0 off the
// completions, without a gradient and in eval mode: the model as it is (the old policy), or
// with its LoRA adapters off (the reference, `reference` true) when no reference model is
// given. Zeros on meta, where nothing is read.
std::vector<double> grpo_host_logprobs(nn::CausalLM& model, const GrpoRows& rows,
                                       double temperature, bool reference,
                                       nn::CausalLM* reference_model = nullptr);

}  // namespace fitgrad::train
