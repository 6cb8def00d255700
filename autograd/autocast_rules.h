// The autocast rules (Note [Autocast] in autograd/autocast.h): one table that gives every op
// (backend::OpId) the policy autocast applies to its operands, and autocast_operands, the one
// function that applies it. The modules that call a lower-policy op (nn::Linear, the tied
// head) pass their operands through it; every other op runs on what it is given.
//
// Note [Autocast op table]
// A row per op, as PyTorch's autocast keeps its op lists (aten/src/ATen/autocast_mode.cpp):
//   lower          PyTorch's lower_precision_fp list (CUDA and CPU alike: mm, bmm, matmul,
//                  linear, addmm, baddbmm, scaled_dot_product_attention). Floating operands
//                  are cast to the compute dtype, the product runs there (the kernels
//                  accumulate in f32) and returns the compute dtype. Here: matmul, linear
//                  and both attentions.
//   fp32_internal  PyTorch's fp32 list. On CUDA: softmax, log_softmax, layer_norm, nll_loss,
//                  cross_entropy, sum, norm, exp, log, rsqrt, pow; of these the CPU list keeps
//                  only the losses (nll_loss, cross_entropy_loss) and lets the norms, softmax
//                  and sums run in bf16 with f32 accumulation inside. PyTorch casts a listed
//                  op's operands to f32 and returns f32. fitgrad deliberately differs: the
//                  operand is taken as it comes, the kernel computes in f32 (statistics, the
//                  log-sum-exp and accumulators stay f32) and the result is rounded once to
//                  the input's dtype, which is what PyTorch's CPU autocast does for the norms
//                  and softmax. For the loss this means the fused, row-chunked cross-entropy
//                  reads the bf16 logits and accumulates in f32 instead of first upcasting
//                  all B*T*V logits to f32, which would be the largest tensor of the step
//                  (DESIGN.md, Numerics). rms_norm gets layer_norm's row, sum_squares (the
//                  gradient norm) norm's.
//   promote        mixed floating operands run in the widest of them (ops::promote_floating:
//                  bf16 + f32 is f32). In PyTorch the binary arithmetic ops are on no list,
//                  since ordinary type promotion already does this; the promote list holds
//                  ops without it (addcmul, dot, ...). fitgrad's front-ends promote
//                  themselves, so autocast casts nothing: the row says what happens.
//   as_is          on no list: the op runs in its operands' dtype. Activations (gelu, silu,
//                  swiglu), rope, dropout, the embedding gather, copies and fills, the
//                  element-wise unaries PyTorch does not list (neg, sqrt, scale). Backward
//                  ops are here as well: a backward rule runs on the dtypes its forward
//                  saved and sends each operand a gradient in that operand's dtype, as
//                  PyTorch's backward runs in the types autocast chose for the forward. So
//                  are the optimizer updates and the RNG fills, which autocast never sees.
// There is deliberately no default row: an op added to FITGRAD_OPS without one fails
// AutocastRules.EveryOpHasExactlyOneRow, so each new op states its policy.
#pragma once

#include <span>
#include <vector>

#include "tensor/backend/op_id.h"
#include "tensor/tensor.h"

namespace fitgrad::autograd {

enum class AutocastPolicy : uint8_t { lower, fp32_internal, promote, as_is };

struct AutocastRule {
  backend::OpId op;
  AutocastPolicy policy;
};

// Every row of the table (Note [Autocast op table]), in FITGRAD_OPS order.
std::span<const AutocastRule> autocast_rules();
// The policy of op's row.
AutocastPolicy autocast_policy(backend::OpId op);
const char* policy_name(AutocastPolicy policy);

// The operands op should be called with under the thread's autocast mode: for a lower op
// with autocast on, each floating operand in the compute dtype (a weight through the step's
// cache, autograd/autocast_cache.h); otherwise, and for undefined or integer operands, the
// operands as they are. The casts are differentiable.
std::vector<Tensor> autocast_operands(backend::OpId op, std::vector<Tensor> operands);
Tensor autocast_operand(backend::OpId op, const Tensor& operand);

}  // namespace fitgrad::autograd
