// The step's cost model (Note [The step's cost model] in cost_model.h).
#include "apps/memplan/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "optim/factory.h"
#include "tensor/error.h"

namespace fitgrad::apps {

using train::TrainArgs;
namespace {

// Elements per token and hidden unit that a block saves for backward (Korthikanti et al.,
// 2022: 34 bytes in 16 bits, less the 5 a s / h of the attention matrix).
constexpr double kSavedPerTokenHidden = 17;

struct Sizes {
  double block_linear = 0;  // weights of one block's linears
  double head = 0;          // weights of the output head
  double mlp = 0;           // weights of one block's MLP
};

// Host link bandwidth for activation offload, GB/s: PCIe 4.0 x16's about 25 GB/s in each
// direction. The copies overlap the blocks' compute (Note [Offload overlaps with one block
// in flight] in train/activation_offload.h), so the step takes the longer of the two.
constexpr double kHostLinkGBs = 25;

Sizes linear_weights(const nn::ModelConfig& c) {
  const double h = double(c.hidden_size), d = double(c.resolved_head_dim());
  const double attn = h * d * double(2 * c.num_heads + 2 * c.num_kv_heads);
  const double mlp = double(c.family == nn::Family::gpt2 ? 2 : 3) * h * double(c.intermediate_size);
  return {attn + mlp, h * double(c.vocab_size), mlp};
}

// GaLore's SVD on a card (Note [GaLore's SVD on a card] in cuda/ops/svd_basis.cpp): the Gram
// matrix of the basis side, 2 d^2 D FLOPs for d = min(m, n) and D = max(m, n) at the card's
// f32 rate, then cuSOLVER's syevd on it, counted as 9 d^3 FLOPs (LAPACK's 4/3 d^3 for the
// tridiagonal reduction, about as much for the divide and conquer, 2 d^3 for the
// back-transformation, and margin) at an assumed 1 TFLOP/s: syevd's reduction is bound by
// memory traffic, far below the card's GEMM rate. Not measured: no card was at hand.
constexpr double kSyevdGflops = 1000;

struct GaLoreCost {
  double flops = 0;        // per step: R = P^T G and the back-projection, 4 r m n per weight
  double svd_seconds = 0;  // per step: each target's SVD every update_proj_gap steps
  double weights = 0;      // elements of the target weights
};

// The blocks' linears as GaLore's targets (attn,mlp names them all), at the rank and gap of
// --optim_args.
GaLoreCost galore_cost(const nn::ModelConfig& c, const TrainArgs& a, const Rates& rates) {
  const optim::GaLoreOptions o =
      optim::galore_options(a.optim, {a.optim_args, a.optim_target_modules, a.seed});
  const int64_t h = c.hidden_size, q = c.num_heads * c.resolved_head_dim(),
                kv = c.num_kv_heads * c.resolved_head_dim(), I = c.intermediate_size;
  std::vector<std::pair<int64_t, int64_t>> shapes = {{q, h}, {kv, h}, {kv, h},
                                                     {h, q}, {I, h},  {h, I}};
  if (c.family != nn::Family::gpt2) shapes.emplace_back(I, h);
  GaLoreCost g;
  for (const auto& [m, n] : shapes) {
    const double r = double(std::min({o.rank, m, n})), mn = double(m) * double(n);
    g.flops += 4.0 * r * mn;
    const double d = double(std::min(m, n));
    g.svd_seconds +=
        2.0 * d * mn / (rates.fp32_tflops * 1e12) + 9.0 * d * d * d / (kSyevdGflops * 1e9);
    g.weights += mn;
  }
  const double L = double(c.num_layers);
  g.flops *= L;
  g.svd_seconds *= L / double(o.update_proj_gap);
  g.weights *= L;
  return g;
}

}  // namespace

StepCost step_cost(const nn::ModelConfig& c, const TrainArgs& a, const Rates& rates) {
  const bool pure = a.pure_bf16, four_bit = !a.quantize.empty();
  const bool half = a.bf16 || a.fp16 || pure;
  double rate = a.tf32 ? rates.tf32_tflops : rates.fp32_tflops;
  if (a.bf16 || pure) rate = rates.bf16_tflops;
  if (a.fp16) rate = rates.fp16_tflops;
  FG_CHECK(rate > 0, "[memplan] the target has no {} arithmetic", a.fp16 ? "fp16" : "bf16");

  const Sizes w = linear_weights(c);
  const double L = double(c.num_layers), h = double(c.hidden_size), V = double(c.vocab_size);
  const double b = double(a.per_device_train_batch_size), T = double(a.seq_len);
  const double tau = b * T, micro = double(a.gradient_accumulation_steps);
  const double blocks = L * w.block_linear, all_linear = blocks + w.head;
  const double ckpt = a.gradient_checkpointing ? 1.0 : 0.0;
  const double elem = half ? 2.0 : 4.0;

  const double attn_fwd = 2.0 * L * b * T * T * h;
  const double fwd = 2.0 * all_linear * tau + attn_fwd;
  // A frozen 4-bit base computes only input gradients for its blocks (the adapters' own
  // products are small); the head stays dense and trained unless LoRA freezes it too.
  const double lin_bwd = four_bit || a.lora_r > 0 ? 2.0 * all_linear * tau : 4.0 * all_linear * tau;
  const double bwd = lin_bwd + 2.5 * attn_fwd;
  // Row chunking recomputes the head's product, and each MLP once more (Note [Row-chunked
  // head and MLP] in nn/decoder.h).
  const double recompute = ckpt * (2.0 * blocks * tau + attn_fwd) +
                           (a.fused_head_loss ? 2.0 * w.head * tau : 0.0) +
                           (a.tiled_mlp ? 2.0 * L * w.mlp * tau : 0.0);
  StepCost s;
  s.flops = micro * (fwd + bwd + recompute);

  const double weight_use = four_bit ? 4.5 : elem;  // bytes a GEMM's weight read costs
  const double uses = 2.0 + ckpt;
  const double weights = uses * (blocks * weight_use + w.head * elem);
  const double activations = 2.0 * kSavedPerTokenHidden * L * tau * h * elem;
  const double logits = 3.0 * tau * V * 4.0;
  const double trained = four_bit || a.lora_r > 0 ? 0.0 : all_linear;
  const double grad_elem = pure ? 2.0 : 4.0;
  const double accumulate = (micro - 1.0) * 2.0 * trained * grad_elem;
  double per_param = 12;
  // galore_adamw steps its other parameters (the head) with AdamW.
  if ((a.optim.starts_with("adamw") || a.optim == "galore_adamw") &&
      a.optim.find("8bit") == std::string::npos)
    per_param = 28;
  if (a.optim.find("8bit") != std::string::npos) per_param = 16;
  if (pure) per_param -= 6;  // bf16 weights read and written, a bf16 gradient read
  double optimizer = trained * per_param;
  if (a.optim == "apollo" || a.optim == "apollo_mini") {
    // The blocks' weights are projected (their gradient read three times: the projection,
    // the norm, the update), the head takes plain Adam; the projection's product costs
    // 2 r flops per projected weight.
    const double projected = trained > 0 ? blocks : 0.0;
    const double rank =
        double(optim::apollo_options(a.optim, {a.optim_args, a.optim_target_modules, a.seed}).rank);
    optimizer = projected * (pure ? 10.0 : 20.0) + (trained - projected) * (pure ? 22.0 : 28.0);
    s.flops += 2.0 * rank * projected;
  }
  const double cast = a.bf16 || a.fp16 ? 6.0 * all_linear : 0.0;
  s.bytes = micro * (weights + activations + logits) + accumulate + optimizer + cast;
  double svd_seconds = 0;
  if (a.optim.starts_with("galore_") && trained > 0) {
    // A target's update reads its weight and gradient and writes and reads the (m, n)
    // back-projection instead of touching full-size moments: 20 B in fp32, 12 B pure bf16.
    const GaLoreCost g = galore_cost(c, a, rates);
    s.flops += g.flops;
    s.bytes -= g.weights * (per_param - (pure ? 12.0 : 20.0));
    svd_seconds = g.svd_seconds;
  }
  // Each block's checkpointed input goes to the host and back, while the blocks compute.
  const double offloaded = a.offload_activations ? micro * 2.0 * L * tau * h * elem : 0.0;
  s.seconds = std::max(s.flops / (rate * 1e12) + s.bytes / (rates.bandwidth_gbs * 1e9),
                       offloaded / (kHostLinkGBs * 1e9)) +
              svd_seconds;
  return s;
}

}  // namespace fitgrad::apps
