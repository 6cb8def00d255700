// Autocast: mixed precision for the matmul family (DESIGN.md, Numerics), the mode behind
// `fitgrad train --bf16` / `--fp16`.
//
// Note [Autocast]
// While an AutocastGuard(bf16 or f16) is alive on a thread, the modules that multiply by a
// weight (nn::Linear, the tied head) run their product in that compute dtype: the input and
// the fp32 master weight (and bias) are cast to it, the product is taken there (the CPU
// kernels accumulate in fp32), and the result stays in the compute dtype, as PyTorch's
// autocast leaves it. What follows a product runs on what it gets, as in PyTorch's lists:
// activations, attention, RoPE and dropout on the compute dtype (their kernels compute in
// fp32 and round once); the residual add promotes to fp32 (ops::promote_floating), so the
// residual stream, the norms fed by it and the embeddings stay fp32; the loss reads the
// compute-dtype logits and accumulates in fp32. What that buys in memory: every tensor
// saved for backward between a product and the next residual add is stored in the compute
// dtype (half the bytes), at the price of a compute-dtype copy of each weight per forward
// (PyTorch's autocast weight cache holds the same). The casts are differentiable and
// promoted ops send each operand a gradient in its own dtype, so the gradients reaching the
// fp32 parameters are fp32 and accumulate there. The mode is thread-local state read at
// forward time; a checkpointed segment records the mode it ran under and recomputes under
// it (autograd/checkpoint.cpp), so no guard needs to outlive the forward.
#pragma once
#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace fitgrad::autograd {

// The thread's compute dtype for the matmul family; f32 when autocast is off.
DType autocast_dtype();

class AutocastGuard {
 public:
  // dtype: bf16 or f16 turns autocast on, f32 turns it off; anything else throws.
  explicit AutocastGuard(DType dtype);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DType saved_;
};

// x cast (differentiably) to the compute dtype when autocast is on and x is floating;
// x itself otherwise.
Tensor autocast_input(const Tensor& x);

}  // namespace fitgrad::autograd
