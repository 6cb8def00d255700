// Autocast: mixed precision for the matmul family (DESIGN.md, Numerics), the mode behind
// `fitgrad train --bf16` / `--fp16`.
//
// Note [Autocast]
// While an AutocastGuard(bf16 or f16) is alive on a thread, the ops of the matmul family run
// in that compute dtype and the rest run on what they get, by the rules of one table
// (autocast_rules.h, Note [Autocast op table]). The modules that multiply by a weight
// (nn::Linear, the tied head) pass their operands through autocast_operands: the input and
// the fp32 master weight (and bias) are cast to the compute dtype, the product is taken there
// (the CPU kernels accumulate in fp32), and the result stays in the compute dtype, as
// PyTorch's autocast leaves it. Activations, attention, RoPE and dropout run on the compute
// dtype (their kernels compute in fp32 and round once); the residual add promotes to fp32
// (ops::promote_floating), so the residual stream, the norms fed by it and the embeddings
// stay fp32; the loss reads the compute-dtype logits and accumulates in fp32. What that buys
// in memory: every tensor saved for backward between a product and the next residual add is
// stored in the compute dtype (half the bytes), at the price of a compute-dtype copy of each
// weight, made once per optimizer step while an AutocastCacheScope is alive
// (autocast_cache.h, Note [Autocast weight cache]) and once per use otherwise. The casts are
// differentiable and promoted ops send each operand a gradient in its own dtype, so the
// gradients reaching the fp32 parameters are fp32 and accumulate there. The mode is
// thread-local state read at forward time; a checkpointed segment records the mode it ran
// under and recomputes under it (autograd/checkpoint.cpp), so no guard needs to outlive the
// forward.
#pragma once
#include "tensor/dtype.h"

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

}  // namespace fitgrad::autograd
