// Differentiable products, normalisations, embedding, rope, dropout, cross-entropy and
// attention (functions.h). Each rule calls the op's backward front-end in tensor/ops/.
#include <algorithm>

#include "autograd/functions.h"
#include "autograd/lambda_node.h"
#include "tensor/ops/attention.h"
#include "tensor/ops/cross_entropy.h"
#include "tensor/ops/dropout.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/embedding.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/norm.h"
#include "tensor/ops/reduce.h"
#include "tensor/ops/rope.h"
#include "tensor/ops/softmax.h"

namespace fitgrad::autograd {

using Grads = std::vector<Tensor>;

Tensor matmul(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  const bool rec = needs_record({&a, &b});
  Tensor out;
  {
    ForwardScope scope(rec);
    out = ops::matmul(a, b, ta, tb);
  }
  if (!rec) return out;
  // With A' = op(A), B' = op(B): dA' = G B'^T and dB' = A'^T G, transposed back where
  // the operand was used transposed; batch broadcasting is summed away.
  // Each operand is saved only when the other's gradient needs it (Note [Frozen inputs]).
  const bool grad_a = requires_grad(a), grad_b = requires_grad(b);
  auto n = make_node("matmul", [ta, tb, sa = a.shape(), sb = b.shape()](Node& node, Grads& g) {
    const Tensor &A = node.saved[0], &B = node.saved[1], &G = g[0];
    Tensor da, db;
    if (node.needs_input_grad(0))
      da = ops::sum_to(!ta ? ops::matmul(G, B, false, !tb)
                           : (!tb ? ops::matmul(B, G, false, true) : ops::matmul(B, G, true, true)),
                       sa);
    if (!node.needs_input_grad(1)) return Grads{da, db};
    // A shared 2-d B with a batched, untransposed A (a Conv1D layer or a tied head): the
    // batch folds into the rows, so dB is one GEMM over all B T rows instead of a
    // (batch, ...) stack of products summed afterwards (Note [One GEMM for a shared right
    // operand] in tensor/ops/matmul.cpp).
    if (!ta && sb.size() == 2 && sa.size() > 2) {
      const Tensor a2 = A.reshape({-1, A.size(-1)}), g2 = G.reshape({-1, G.size(-1)});
      return Grads{da, !tb ? ops::matmul(a2, g2, true, false) : ops::matmul(g2, a2, true, false)};
    }
    db = !tb ? ops::matmul(A, G, !ta, false)
             : (!ta ? ops::matmul(G, A, true, false) : ops::matmul(G, A, true, true));
    return Grads{da, ops::sum_to(db, sb)};
  });
  n->save(grad_b ? a : Tensor());
  n->save(grad_a ? b : Tensor());
  record(n, {&a, &b}, {&out});
  return out;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const bool rec = needs_record({&x, &weight, &bias});
  Tensor out;
  {
    ForwardScope scope(rec);
    out = ops::linear(x, weight, bias);
  }
  if (!rec) return out;
  // x is saved only for dW, the weight only for dX (Note [Frozen inputs]).
  const bool grad_x = requires_grad(x), grad_w = requires_grad(weight);
  auto n = make_node("linear", [xs = x.shape(), in = weight.size(1), out_features = weight.size(0)](
                                   Node& node, Grads& g) {
    const Tensor &X = node.saved[0], &W = node.saved[1];
    const Tensor g2 = g[0].reshape({-1, out_features});  // (rows, out)
    Tensor dx, dw, db;
    if (node.needs_input_grad(0)) dx = ops::matmul(g2, W).reshape(xs);  // (..., in)
    if (node.needs_input_grad(1))
      dw = ops::matmul(g2, X.reshape({-1, in}), true, false);  // (out, in)
    if (node.needs_input_grad(2)) db = ops::sum(g2, {0});      // (out)
    return Grads{dx, dw, db};
  });
  n->save(grad_w ? x : Tensor());
  n->save(grad_x ? weight : Tensor());
  record(n, {&x, &weight, &bias}, {&out});
  return out;
}

Tensor softmax(const Tensor& x, int64_t dim, bool causal) {
  const bool rec = needs_record({&x});
  Tensor out;
  {
    ForwardScope scope(rec);
    out = causal ? ops::causal_softmax(x) : ops::softmax(x, dim);
  }
  if (!rec) return out;
  auto n = make_node("softmax", [dim = causal ? -1 : dim](Node& node, Grads& g) {
    return Grads{ops::softmax_backward(g[0], node.saved[0], dim)};
  });
  n->save(out);
  record(n, {&x}, {&out});
  return out;
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  const bool rec = needs_record({&x});
  Tensor out;
  {
    ForwardScope scope(rec);
    out = ops::log_softmax(x, dim);
  }
  if (!rec) return out;
  auto n = make_node("log_softmax", [dim](Node& node, Grads& g) {
    return Grads{ops::log_softmax_backward(g[0], node.saved[0], dim)};
  });
  n->save(out);
  record(n, {&x}, {&out});
  return out;
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  const bool rec = needs_record({&x, &weight, &bias});
  ops::LayerNormOut r;
  {
    ForwardScope scope(rec);
    r = ops::layer_norm(x, weight, bias, eps);
  }
  if (!rec) return r.y;
  auto n = make_node("layer_norm", [has_bias = bias.defined()](Node& node, Grads& g) {
    auto d = ops::layer_norm_backward(g[0], node.saved[0], node.saved[1], node.saved[2],
                                      node.saved[3], has_bias);
    return Grads{d.dx, d.dweight, d.dbias};
  });
  n->save(x);
  n->save(weight);
  n->save(r.mean);
  n->save(r.rstd);
  record(n, {&x, &weight, &bias}, {&r.y});
  return r.y;
}

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  const bool rec = needs_record({&x, &weight});
  ops::RmsNormOut r;
  {
    ForwardScope scope(rec);
    r = ops::rms_norm(x, weight, eps);
  }
  if (!rec) return r.y;
  auto n = make_node("rms_norm", [](Node& node, Grads& g) {
    auto d = ops::rms_norm_backward(g[0], node.saved[0], node.saved[1], node.saved[2]);
    return Grads{d.dx, d.dweight};
  });
  n->save(x);
  n->save(weight);
  n->save(r.rstd);
  record(n, {&x, &weight}, {&r.y});
  return r.y;
}

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  const bool rec = needs_record({&weight});
  Tensor out;
  {
    ForwardScope scope(rec);
    out = ops::embedding(weight, ids);
  }
  if (!rec) return out;
  auto n =
      make_node("embedding", [rows = weight.size(0), dtype = weight.dtype()](Node& node, Grads& g) {
        return Grads{ops::embedding_backward(g[0], node.saved[0], rows).to(dtype)};
      });
  n->save(ids);
  record(n, {&weight}, {&out});
  return out;
}

Tensor rope(const Tensor& x, int64_t position_offset, const RopeParams& rope,
            const ops::RopePositions& positions) {
  const bool rec = needs_record({&x});
  Tensor out;
  {
    ForwardScope scope(rec);
    out = ops::rope(x, position_offset, rope, positions);
  }
  if (!rec) return out;
  auto n = make_node("rope", [position_offset, rope, positions](Node&, Grads& g) {
    return Grads{ops::rope_backward(g[0], position_offset, rope, positions)};
  });
  record(n, {&x}, {&out});
  return out;
}

Tensor dropout(const Tensor& x, double p, Generator& gen) {
  const bool rec = needs_record({&x});
  ops::DropoutOut r;
  {
    ForwardScope scope(rec);
    r = ops::dropout(x, p, gen);
  }
  Tensor out = own(r.y, x);
  if (!rec) return out;
  auto n = make_node("dropout", [p, state = r.state](Node&, Grads& g) {
    return Grads{ops::dropout_backward(g[0], p, state)};
  });
  record(n, {&x}, {&out});
  return out;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  const bool rec = needs_record({&logits});
  ops::CrossEntropyOut r;
  {
    ForwardScope scope(rec);
    r = ops::cross_entropy(logits, targets, ignore_index);
  }
  if (!rec) return r.loss;
  // Note [Cross-entropy gradient over the logits]
  // A language model's logits are the largest tensor of a training step (B T V fp32:
  // 393 MiB for GPT-2's vocabulary at B T = 2048), and usually nothing but this node reads
  // them after the forward. When the saved alias is the only holder of their storage
  // (every other handle dropped, no other node saved them), the gradient is written over
  // them instead of beside them, as the kernel computes each row's gradient from that row
  // alone; a caller who still holds the logits gets a fresh gradient. In the ledger the
  // gradient then keeps the logits' block (activation, the head's label) until the head's
  // backward has consumed it.
  auto n = make_node("cross_entropy", [stats = r.stats, ignore_index](Node& node, Grads& g) {
    const Tensor& logits = node.saved[0];
    const bool sole = logits.storage() && logits.storage().use_count() == 1;
    return Grads{ops::cross_entropy_backward(g[0], logits, node.saved[1], node.saved[2], stats,
                                             ignore_index, sole)};
  });
  n->save(logits);
  n->save(targets);
  n->save(r.lse);
  record(n, {&logits}, {&r.loss});
  return r.loss;
}

// Note [Sequence log-probabilities]
// Preference objectives (train/preference_loss.h) need each answer's summed log-probability,
// log p(answer | prompt) = -sum_t nll_t over its trained targets, with a gradient. Each
// sequence runs through the fused cross-entropy of its own (n, V) rows: a row of the batch, or
// the span of a row that packs several answers. Its summed NLL is the kernel's double
// statistic (read on the host, one read a sequence: a preference step reads its
// log-probabilities anyway), and the backward is the cross-entropy's, its scalar gradient
// g_s x count_s so that each position gets g_s (softmax - onehot). The positions no span
// covers (a packed row's padding) get a zero gradient. As in cross_entropy, a sole f32 logits
// tensor takes its gradient in place, sequence by sequence.
Tensor sequence_nll(const Tensor& logits, const Tensor& targets, std::span<const RowSpan> spans,
                    int64_t ignore_index) {
  FG_CHECK(logits.dim() == 3 && targets.shape() == Shape({logits.size(0), logits.size(1)}),
           "[sequence_nll] logits (R, T, V) and targets (R, T), got {} and {}",
           shape_str(logits.shape()), shape_str(targets.shape()));
  const int64_t R = logits.size(0), T = logits.size(1), V = logits.size(2);
  std::vector<RowSpan> seqs(spans.begin(), spans.end());
  if (seqs.empty())
    for (int64_t r = 0; r < R; ++r) seqs.push_back({r, 0, T});
  // The uncovered positions of each row, for the backward's zeros.
  std::vector<RowSpan> gaps;
  {
    std::vector<RowSpan> sorted = seqs;
    std::sort(sorted.begin(), sorted.end(), [](const RowSpan& a, const RowSpan& b) {
      return a.row != b.row ? a.row < b.row : a.begin < b.begin;
    });
    int64_t row = 0, at = 0;
    for (const RowSpan& q : sorted) {
      FG_CHECK(q.row >= 0 && q.row < R && q.begin >= 0 && q.begin < q.end && q.end <= T,
               "[sequence_nll] span row {} [{}, {}) is not within ({}, {})", q.row, q.begin, q.end,
               R, T);
      for (; row < q.row; ++row, at = 0)
        if (at < T) gaps.push_back({row, at, T});
      FG_CHECK(q.begin >= at, "[sequence_nll] spans overlap in row {} at {}", q.row, q.begin);
      if (at < q.begin) gaps.push_back({row, at, q.begin});
      at = q.end;
    }
    for (; row < R; ++row, at = 0)
      if (at < T) gaps.push_back({row, at, T});
  }
  const auto N = int64_t(seqs.size());
  const bool rec = needs_record({&logits});
  const Tensor x = logits.is_contiguous() ? logits : logits.contiguous();
  const Tensor y = targets.is_contiguous() ? targets : targets.contiguous();
  // Sequence q's (n, V) logits and (n) targets of t (R, T, ...).
  const auto part = [T, V](const Tensor& t, const RowSpan& q) {
    const Tensor row = t.narrow(0, q.row, 1);
    return (t.dim() == 3 ? row.reshape({T, V}) : row.reshape({T}))
        .narrow(0, q.begin, q.end - q.begin);
  };
  std::vector<ops::CrossEntropyOut> parts(static_cast<size_t>(N));
  std::vector<float> nll(static_cast<size_t>(N));
  std::vector<int64_t> counts(static_cast<size_t>(N));
  Tensor out;
  {
    ForwardScope scope(rec);
    for (int64_t s = 0; s < N; ++s) {
      parts[size_t(s)] =
          ops::cross_entropy(part(x, seqs[size_t(s)]), part(y, seqs[size_t(s)]), ignore_index);
      counts[size_t(s)] = parts[size_t(s)].count();
      nll[size_t(s)] = float(parts[size_t(s)].nll_sum());
    }
    out = x.device().has_bytes() ? Tensor::from_vector(nll, {N}, DType::f32, x.device())
                                 : Tensor::empty({N}, DType::f32, x.device());
  }
  if (!rec) return out;
  auto n = make_node("sequence_nll", [parts, counts, seqs, gaps, part, ignore_index](Node& node,
                                                                                     Grads& g) {
    const Tensor& saved = node.saved[0];  // (R, T, V)
    const Tensor& targets = node.saved[1];
    const bool sole = saved.storage() && saved.storage().use_count() == 1 &&
                      saved.dtype() == DType::f32 && saved.is_contiguous();
    Tensor grad = sole ? saved : Tensor::empty(saved.shape(), saved.dtype(), saved.device());
    for (size_t s = 0; s < seqs.size(); ++s) {
      const ops::CrossEntropyOut& p = parts[s];
      const Tensor dloss = ops::scale(g[0].narrow(0, int64_t(s), 1).reshape({}), double(counts[s]));
      Tensor rows = part(grad, seqs[s]);
      const Tensor d =
          ops::cross_entropy_backward(dloss, sole ? rows : part(saved, seqs[s]),
                                      part(targets, seqs[s]), p.lse, p.stats, ignore_index, sole);
      if (!d.same(rows)) rows.copy_(d);
    }
    for (const RowSpan& q : gaps) part(grad, q).fill_(0.0);
    return Grads{grad};
  });
  n->save(x);
  n->save(y);
  record(n, {&logits}, {&out});
  return out;
}

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v,
                 const backend::AttentionMask& mask, double scale, double dropout_p,
                 Generator& gen) {
  const bool rec = needs_record({&q, &k, &v});
  ops::AttentionOut r;
  {
    ForwardScope scope(rec);
    r = ops::flash_attention(q, k, v, mask, scale, dropout_p, gen);
  }
  if (!rec) return r.o;
  // The node keeps the dropout's RngState, never a mask (Note [Dropout inside flash attention]).
  auto n = make_node("attention",
                     [mask, scale, dropout_p, state = r.dropout_state](Node& node, Grads& g) {
                       const auto& s = node.saved;
                       auto d = ops::flash_attention_backward(g[0], s[0], s[1], s[2], s[3], s[4],
                                                              mask, scale, dropout_p, state);
                       return Grads{d.dq, d.dk, d.dv};
                     });
  for (const Tensor* t : std::initializer_list<const Tensor*>{&q, &k, &v, &r.o, &r.lse})
    n->save(*t);
  record(n, {&q, &k, &v}, {&r.o});
  return r.o;
}

}  // namespace fitgrad::autograd
