// APOLLO and APOLLO-Mini (Zhu et al. 2024, "APOLLO: SGD-like Memory, AdamW-level
// Performance", arXiv 2412.05270), with the semantics and published defaults of the authors'
// apollo_torch.APOLLOAdamW. Each 2-D weight of the target modules keeps Adam's moments only
// for its gradient projected to rank r by a random Gaussian matrix, and is updated with the
// full gradient scaled by how much Adam would have scaled the projected one: per channel
// (APOLLO) or per tensor (APOLLO-Mini). Every other parameter takes the class's plain Adam.
//
// Note [APOLLO's update]
// For a projected weight W (m, n) with gradient G at its own step t (1, 2, ...):
//   - P (r, k), k = min(m, n), is N(0, 1/r) and drawn afresh at t = 1, T + 1, 2T + 1, ...
//     (T = update_proj_gap): the reference projects the smaller side, R = G P^T (m, r) when
//     m >= n, else R = P G (r, n) (the reference's P is then the transpose of ours);
//   - m = b1 m + (1 - b1) R, v = b2 v + (1 - b2) R^2, N = m / (sqrt(v) + eps) (no bias
//     correction inside: it is in the step size, lr sqrt(1 - b2^t) / (1 - b1^t));
//   - the scaling factor is the norm ratio s = ||N|| / (||R|| + 1e-8) over the rank index,
//     per channel: one per row of W when m >= n and one per column when m < n (always the
//     larger side); APOLLO-Mini (scaling tensor) takes one ratio over all of R;
//   - S = G s, through Fira's norm-growth limiter: from the second step on, S is divided by
//     l = max(||S|| / (prev + 1e-8), gamma) / gamma, and prev = ||S|| / l (gamma 1.01);
//   - W = W - step sqrt(scale) S, then W = W - lr wd W (decoupled decay after the update).
// The other parameters (not 2-D, or not named by a target module) take the same class's
// plain step: W = W - step m / (sqrt(v) + eps), then the same decay; that is transformers'
// old AdamW (eps before the bias correction, decay after the update), not torch's, as in
// the reference. A projected weight is a 2-D weight of a target module (Hugging Face's match,
// Note [Optimizer target modules] in optim/target_modules.h; default "attn" and "mlp", as the
// reference's pre-training script), so embeddings, the head and norms stay plain. The rank
// is not capped by the matrix: r above min(m, n) is the reference's behaviour too (and costs
// more than AdamW). tests/golden/gen_apollo_golden.py writes this
// out in NumPy and checks it against apollo_torch itself (2e-16 in float64).
//
// Note [APOLLO projections]
// P is never stored: it is drawn again at every step from a key that depends only on the
// optimizer's seed, the parameter's index and the refresh j = (t - 1) / T, so a resumed run
// draws exactly the projections of the uninterrupted one. The key of (index i, refresh j)
// is words 0 and 1 (low, high) of the Philox-4x32-10 block of counter (lo32(j), hi32(j), i,
// 0x41504F4C) under key (lo32(seed), hi32(seed)); the constant word keeps these counters
// apart from the ordinary streams, whose words 2 and 3 are 0 (Note [Philox streams]). P
// (r, k) is then ops::normal_ of that key from offset 0 with std 1/sqrt(r), row by row, in
// the gradient's dtype (as the reference casts its projection). The seed is saved in the
// state_dict ("projection_seed"), like the stochastic-rounding stream. The reference
// instead seeds parameter i with i and chains torch.Generator seeds; only the distribution
// is the paper's, not the numbers.
//
// State (Note [Declared optimizer state]): a projected weight has "exp_avg" and
// "exp_avg_sq", f32 (m, r) or (r, n), and "scaled_grad_norm", one f32 (the limiter's prev):
// 8 r max(m, n) + 4 bytes instead of AdamW's 8 m n. Any other parameter has "exp_avg" and
// "exp_avg_sq" shaped like itself. Each step of a projected weight also takes, for the step
// only, P and R in the gradient's dtype and the kernel's workspace (Note [APOLLO's
// workspace] in tensor/backend/apollo_workspace.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace fitgrad::optim {

enum class ApolloScaling { channel, tensor };

struct ApolloOptions {  // APOLLO's published defaults (the reference class's lr, betas, eps)
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-6;
  int64_t rank = 256;
  double scale = 1.0;  // the update is multiplied by sqrt(scale)
  ApolloScaling scaling = ApolloScaling::channel;
  int64_t update_proj_gap = 200;
  double norm_growth_limit = 1.01;
  std::vector<std::string> target_modules = {"attn", "mlp"};
  uint64_t seed = 0;  // of the projections (Note [APOLLO projections])
};
// APOLLO-Mini's: rank 1, scale 128 (the update times sqrt(128)), tensor-wise scaling.
ApolloOptions apollo_mini_options();
// Throws "[op] <option> must be ..." for the first option out of range.
void check_apollo_options(const ApolloOptions& options, const char* op);

class Apollo : public Optimizer {
 public:
  // `name` (a string literal) is what name() reports and errors start with: "apollo" or
  // "apollo_mini". Throws naming the option when one is out of range, and when no
  // parameter is a 2-D weight of the target modules.
  Apollo(std::vector<ParamGroup> groups, const ApolloOptions& options, const char* name = "apollo");

  std::string name() const override { return name_; }
  const ApolloOptions& options() const { return options_; }
  // Whether parameter `index` (as num_params() counts) is projected.
  bool projected(size_t index) const { return projected_[index]; }
  // The projection of projected parameter `index` at refresh `refresh`: (rank, min(m, n))
  // in `dtype` on the parameter's device, N(0, 1/rank) (Note [APOLLO projections]).
  Tensor projection(size_t index, int64_t refresh, DType dtype) const;

  std::map<std::string, Tensor> state_dict() const override;
  void load_state_dict(const std::map<std::string, Tensor>& state) override;

 protected:
  void update(size_t index, const ParamGroup& group, const std::string& name, const Tensor& param,
              const Tensor& grad) override;

 private:
  ApolloOptions options_;
  const char* name_;
  std::vector<char> projected_;  // by index
};

// The Philox key of parameter `index`'s projection at refresh `refresh` (Note [APOLLO
// projections]).
uint64_t apollo_projection_key(uint64_t seed, uint64_t index, uint64_t refresh);

}  // namespace fitgrad::optim
