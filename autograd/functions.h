// Differentiable ops: each calls its front-end in tensor/ops/ and, when grad mode is on
// and an input requires grad, records a node whose rule is written with the front-ends
// (DESIGN.md, Autograd). Shapes, dtypes and errors are those of tensor/ops/.
//
// The fused ops (attention, cross-entropy, layer/rms norm, swiglu) save only what their
// rules need: flash attention saves q, k, v, o, the log-sum-exp and, with dropout, its RNG
// state; cross-entropy saves the logits and the log-sum-exp; dropout saves its RNG state,
// not a mask.
#pragma once

#include <span>
#include <vector>

#include "tensor/backend/attention_mask.h"
#include "tensor/ops/rope.h"
#include "tensor/random/generator.h"
#include "tensor/rope_params.h"
#include "tensor/row_span.h"
#include "tensor/tensor.h"

namespace fitgrad::autograd {

// Elementwise (NumPy broadcasting for the binary ops).
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor scale(const Tensor& a, double s);
Tensor add_scalar(const Tensor& a, double s);
Tensor neg(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor pow(const Tensor& a, double p);
Tensor gelu(const Tensor& x);  // tanh approximation
Tensor silu(const Tensor& x);
Tensor swiglu(const Tensor& gate, const Tensor& up);  // silu(gate) * up
Tensor cast(const Tensor& x, DType dtype);

// Reductions.
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor max(const Tensor& a, int64_t dim, bool keepdim = false);  // values

// Products.
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

// Normalisation and friends (over the last dim for the norms).
// causal: ops::causal_softmax over the last dim (dim is then ignored; Note [Causal softmax]).
Tensor softmax(const Tensor& x, int64_t dim, bool causal = false);
Tensor log_softmax(const Tensor& x, int64_t dim);
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps = 1e-6);
Tensor embedding(const Tensor& weight, const Tensor& ids);
// x (B, H, T, D); positions for packed rows (tensor/ops/rope.h).
Tensor rope(const Tensor& x, int64_t position_offset, const RopeParams& rope,
            const ops::RopePositions& positions = {});
Tensor dropout(const Tensor& x, double p, Generator& gen = default_generator());
// Mean over non-ignored targets; logits (N, V), targets (N).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);
// Each sequence's negative log-likelihood summed over its non-ignored targets (Note [Sequence
// log-probabilities] in functions_nn.cpp): logits (R, T, V), targets (R, T) -> (N) f32, where
// sequence n is the positions of spans[n] (rows that pack several sequences), or with no spans
// row n whole (N = R). Spans must not overlap; positions outside every span get no gradient.
Tensor sequence_nll(const Tensor& logits, const Tensor& targets,
                    std::span<const RowSpan> spans = {}, int64_t ignore_index = -100);
// q (B, Hq, T, D), k and v (B, Hkv, S, D) -> (B, Hq, T, D); dropout_p > 0 drops the
// probabilities inside the kernel with draws from `gen` (Note [Dropout inside flash
// attention] in tensor/ops/attention.h).
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v,
                 const backend::AttentionMask& mask, double scale = 0, double dropout_p = 0,
                 Generator& gen = default_generator());

// Views and layout: the result shares storage where tensor/ would.
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor expand(const Tensor& x, const Shape& shape);
Tensor contiguous(const Tensor& x);

}  // namespace fitgrad::autograd
