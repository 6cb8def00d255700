// memplan's cost model (apps/memplan/): the predicted time of one optimizer step, used only
// to rank settings against each other (`fitgrad memplan --fit`, bench/anatomy).
//
// Note [The step's cost model]
// A step costs its arithmetic at the target's dense rate for its precision plus its memory
// traffic at the target's bandwidth, added (no overlap is assumed):
//   - FLOPs per micro-batch of tau = batch x seq tokens: the forward 2 N tau over the N
//     weights of the linears and the head, plus causal attention's 2 L b T^2 h; the
//     backward twice the linears' forward (only the input gradient, once, for a frozen
//     4-bit base) and 2.5 times attention's (flash attention recomputes the scores); with
//     checkpointing the blocks' forward once more; the fused head its product once more,
//     and the tiled MLP each MLP once more (their recompute).
//   - Traffic per micro-batch: the weights read by every use (forward, input gradient, and
//     the recompute) in the compute dtype, a 4-bit base dequantized at each use (0.5 B
//     read, 2 B written and read again per weight); the saved activations written and read
//     (17 elements per token and hidden unit per block, Korthikanti et al.'s 34 bytes in
//     16 bits without the attention matrix, which flash attention never stores); the
//     logits, chunked in the loss (3 passes); and the gradients read and written by every
//     micro-batch after the first. Per step: the optimizer's traffic per trained parameter
//     (AdamW 28 B in fp32: the weight, its gradient and two moments read and written;
//     Adam8bit 16 B; Adafactor and SGD 12 B; APOLLO 20 B for the blocks' projected weights,
//     whose gradient it reads three times, and AdamW's 28 B for the head, plus 2 r flops per
//     projected weight for the projection; pure bf16 weights and gradients are half) and
//     autocast's one cast of each weight (6 B).
// Offloaded activations send each block's checkpointed input to the host and back at 25 GB/s
// (PCIe 4.0 x16) while the blocks compute: the step takes the longer of the two.
// GaLore (the blocks' linears, as its usual targets attn,mlp name them) adds its projections,
// 4 r FLOPs per target weight per step, reads and writes the (m, n) back-projection instead of
// full-size moments, and adds each target's SVD every update_proj_gap steps: the Gram matrix
// at the f32 rate and cuSOLVER's eigensolver at an assumed 1 TFLOP/s (Note [GaLore's SVD on a
// card] in cuda/ops/svd_basis.cpp).
// Optimizer-in-backward moves the optimizer's work, not its amount, so it costs the same.
#pragma once

#include <cstdint>

#include "apps/memplan/targets.h"
#include "nn/config.h"
#include "train/train_args.h"

namespace fitgrad::apps {

struct StepCost {
  double flops = 0;
  double bytes = 0;    // memory traffic
  double seconds = 0;  // flops / rate + bytes / bandwidth
};

// The cost of one optimizer step of `args` on a model of `cfg` at `rates`. Throws
// fitgrad::Error when the precision has no rate there (bf16 on a V100).
StepCost step_cost(const nn::ModelConfig& cfg, const train::TrainArgs& args, const Rates& rates);

}  // namespace fitgrad::apps
