// Autocast: mixed precision for the matmul family (DESIGN.md, Numerics), the mode behind
// `fitgrad train --bf16` / `--fp16`.
//
// Note [Autocast]
// While an AutocastGuard(bf16 or f16) is alive on a thread, the modules that multiply by a
// weight (nn::Linear, the tied head) run their product in that compute dtype: the input and
// the fp32 master weight (and bias) are cast to it, the product is taken there (the CPU
// kernels accumulate in fp32), and the result is cast back to fp32. Everything else --
// embeddings, norms, softmax, attention, the residual stream and the loss -- stays fp32, as
// in PyTorch's autocast lists. What that buys in memory: the matmul inputs saved for
// backward are stored in the compute dtype (half the bytes), at the price of a compute-dtype
// copy of each weight per forward (PyTorch's autocast weight cache holds the same). The casts
// are differentiable, so the gradients reaching the fp32 parameters are fp32 and accumulate
// there. The mode is thread-local state read at forward time; a checkpointed segment is
// recomputed during backward, so the guard must stay alive across backward too (the trainer
// holds it around the whole step), or the recompute would differ from the forward.
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
// y cast back to f32 when autocast is on; y itself otherwise.
Tensor autocast_output(const Tensor& y);

}  // namespace fitgrad::autograd
