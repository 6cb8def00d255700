// GRPO's rows and their log-probabilities without a gradient (grpo_rows.h, Note [GRPO rows]).
#include "train/objectives/grpo_rows.h"

#include <algorithm>
#include <optional>

#include "autograd/grad_mode.h"
#include "nn/lora.h"
#include "tensor/error.h"
#include "tensor/memory/scope.h"

namespace fitgrad::train {

GrpoRows grpo_rows(const std::vector<std::vector<int32_t>>& prompts,
                   const std::vector<std::vector<int32_t>>& completions,
                   const std::vector<bool>& truncated, const GrpoConfig& config, int64_t pad_id,
                   Device device) {
  FG_CHECK(!prompts.empty() && prompts.size() == completions.size() &&
               prompts.size() == truncated.size(),
           "[grpo] {} prompts, {} completions and {} truncation flags: one of each per row",
           prompts.size(), completions.size(), truncated.size());
  GrpoRows r;
  r.rows = int64_t(prompts.size());
  for (size_t b = 0; b < prompts.size(); ++b) {
    FG_CHECK(!prompts[b].empty(), "[grpo] row {} has an empty prompt", b);
    r.length = std::max(r.length, int64_t(prompts[b].size() + completions[b].size()));
  }
  const auto l = size_t(r.length);
  std::vector<int64_t> ids(size_t(r.rows) * l, pad_id), targets(size_t(r.rows) * l, -100);
  std::vector<double> completion(size_t(r.rows) * l, 0.0);  // (B, L)
  for (size_t b = 0; b < prompts.size(); ++b) {
    const size_t p = prompts[b].size(), row = b * l;
    std::copy(prompts[b].begin(), prompts[b].end(), ids.begin() + ptrdiff_t(row));
    for (size_t k = 0; k < completions[b].size(); ++k) {
      ids[row + p + k] = completions[b][k];
      targets[row + p + k - 1] = completions[b][k];
      completion[row + p + k - 1] = 1.0;
    }
  }
  r.ids = Tensor::from_vector(ids, {r.rows, r.length}, DType::i64, device);
  r.targets = Tensor::from_vector(targets, {r.rows, r.length}, DType::i64, device);
  r.mask = grpo_loss_mask(config, completion, truncated);
  return r;
}

std::vector<double> grpo_host_logprobs(nn::CausalLM& model, const GrpoRows& rows,
                                       double temperature, bool reference,
                                       nn::CausalLM* reference_model) {
  nn::CausalLM& m = reference && reference_model ? *reference_model : model;
  const bool training = m.training();
  m.eval();
  std::vector<double> out;
  {
    const autograd::NoGradGuard no_grad;
    const LabelScope label(reference ? "reference" : "old policy");
    std::optional<nn::AdaptersOff> off;
    if (reference && !reference_model) off.emplace();
    const Tensor logp = m.token_logprobs(rows.ids, rows.targets, temperature);  // (B, L)
    out = logp.device().has_bytes() ? logp.to_vector<double>()
                                    : std::vector<double>(size_t(logp.numel()), 0.0);
  }
  m.train(training);
  return out;
}

}  // namespace fitgrad::train
