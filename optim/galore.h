// GaLore (Zhao et al. 2024, "GaLore: Memory-Efficient LLM Training by Gradient Low-Rank
// Projection", arXiv 2403.03507) with the semantics of its reference implementation
// (galore_torch's GaLoreAdamW and GaLoreAdamW8bit, which transformers' Trainer builds for
// --optim galore_adamw and galore_adamw_8bit). For each target weight W (m, n), a 2-D weight
// of the target modules (Note [GaLore targets]), and its gradient G at the weight's step t (0
// at its first):
//   every update_proj_gap steps (t % gap == 0) the projection is refreshed from a truncated
//   SVD of G, r = min(rank, m, n), "std" projection as the reference's GaLoreProjector:
//     m >= n: Q = Vh[:r, :] (r, n),  R = G Q^T (m, r),  back(N) = N Q (m, n)
//     m <  n: P = U[:, :r]  (m, r),  R = P^T G (r, n),  back(N) = P N (m, n)
//   Adam in the low-rank space, bias-corrected as transformers' old AdamW, which the
//   reference copies (eps added before the bias correction):
//     M <- beta1 M + (1 - beta1) R,  V <- beta2 V + (1 - beta2) R^2
//     N = M / (sqrt(V) + eps),  step_size = lr sqrt(1 - beta2^t') / (1 - beta1^t')  (t' = t + 1)
//   W <- W - step_size * scale * back(N), then W <- W (1 - lr * weight_decay).
// The moments M, V are kept across a refresh (the reference does not reset them; Note
// [Singular vector signs] in tensor/cpu/svd.h fixes the new basis's signs so that this is
// well defined). galore_adamw_8bit keeps M and V in bitsandbytes' blockwise 8-bit format
// (Adam8bit's kernel on the (m, r) or (r, n) low-rank step, from min_8bit_size elements;
// bitsandbytes' arithmetic, eps scaled by sqrt(1 - beta2^t')), then the same back-projection,
// scale and decay, as the reference's GaLoreAdamW8bit. Every other parameter takes AdamW
// (galore_adamw) or Adam8bit (galore_adamw_8bit) exactly as those optimizers do, with its
// group's weight decay. lr, the betas and eps are the user's (--learning_rate, --adam_beta1/2,
// --adam_epsilon), where transformers passes galore_torch only lr and leaves eps at that
// library's 1e-6 (8-bit: 1e-8) and the weight decay at 0 (8-bit: 0.01) for every parameter.
//
// State per target weight (Note [Declared optimizer state]): "exp_avg", "exp_avg_sq" (f32,
// the low-rank shape) or Adam8bit's "state1", "state2", "absmax1", "absmax2" of that shape,
// and "projection" (P or Q, in the weight's dtype, as the reference keeps it in the
// gradient's): f32 8 r max(m, n) + e r min(m, n) bytes for e bytes per weight element, the
// 8-bit variant 2 r max(m, n) + 8 ceil(r max(m, n) / 256) + e r min(m, n). A step of a target
// weight also holds temporaries (category temporary, label "<param>.galore"): R and the
// low-rank step, and back(N) (m, n) in the weight's dtype, as the reference does.
//
// Note [Applying GaLore's update]
// The low-rank step is computed by the existing fused kernels on a zeroed low-rank buffer:
// AdamW's with decay 1 and bias_correction2_sqrt 1 gives exactly the reference's
// eps-before-correction form, Adam8bit's with no weight decay bitsandbytes' step. Their step
// size carries scale (1 - lr wd), so back() of the buffer is D = (1 - lr wd) step_size scale
// back(N), and SGD's kernel with lr 1 and weight decay lr wd then writes
// W - (D + lr wd W) = (1 - lr wd)(W - step_size scale back(N)), the reference's two updates,
// in one pass over W that rounds once (stochastically for a bf16 weight when asked, Note
// [Stochastic rounding of updates]). On meta the SVD does nothing and every buffer is
// allocated as in the real run, so a dry run plans the step exactly.
//
// Note [GaLore targets]
// The projected weights are the 2-D weights of the target modules, matched as APOLLO's (Note
// [Optimizer target modules] in optim/target_modules.h); the reference's pre-training "attn",
// "mlp" take every attention and MLP projection of GPT-2 and Llama. The library's default is
// that list; the command line has none, as transformers' Trainer, which refuses GaLore
// without optim_target_modules. An entry that matches nothing is not an error, but a list
// that matches no weight is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optim/adamw.h"
#include "optim/optimizer.h"

namespace fitgrad::optim {

struct GaLoreOptions {
  int64_t rank = 128;
  int64_t update_proj_gap = 200;
  double scale = 0.25;
  std::vector<std::string> target_modules = {"attn", "mlp"};  // Note [GaLore targets]
};
// Throws "[op] <option> must be ..." for the first option out of range.
void check_galore_options(const GaLoreOptions& options, const std::string& op);

// The projection of a target weight of shape (m, n) at `rank`.
struct GaLoreLayout {
  bool left = false;  // m < n: P (m, r) on the left; else Q (r, n) on the right
  int64_t rank = 0;   // min(rank, m, n)
  Shape low;          // (r, n) or (m, r)
  Shape projection;   // (m, r) or (r, n)
};
GaLoreLayout galore_layout(const Shape& weight, int64_t rank);

class GaLore : public Optimizer {
 public:
  // eight_bit: galore_adamw_8bit. adam gives lr, the betas and eps (its weight_decay is
  // unused: each group has its own).
  GaLore(std::vector<ParamGroup> groups, const AdamWOptions& adam, const GaLoreOptions& galore,
         bool eight_bit);

  std::string name() const override { return eight_bit_ ? "galore_adamw_8bit" : "galore_adamw"; }
  const GaLoreOptions& galore_options() const { return galore_; }
  // Whether parameter `index` (as num_params() counts) is projected.
  bool projected(size_t index) const { return projected_[index] != 0; }

 protected:
  void update(size_t index, const ParamGroup& group, const std::string& name, const Tensor& param,
              const Tensor& grad) override;

 private:
  void update_projected(size_t index, const ParamGroup& group, const std::string& name,
                        const Tensor& param, const Tensor& grad);

  AdamWOptions adam_;
  GaLoreOptions galore_;
  bool eight_bit_;
  std::vector<char> projected_;  // by index
};

}  // namespace fitgrad::optim
