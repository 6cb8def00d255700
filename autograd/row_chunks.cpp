// tiled_rows, chunked_head_cross_entropy and chunked_head_token_logprobs (row_chunks.h): one
// node per call that saves its input and recomputes chunk by chunk in backward (Note
// [Row-chunked recompute]).
#include "autograd/row_chunks.h"

#include <algorithm>

#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "tensor/error.h"
#include "tensor/ops/cross_entropy.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/embedding.h"
#include "tensor/ops/reduce.h"
#include "tensor/ops/softmax.h"
#include "tensor/random/generator.h"

namespace fitgrad::autograd {

namespace {

// What the node of either function keeps: fn, the row chunks, the generator state before
// each chunk's forward, the autocast mode, and (saved[0]) x itself.
struct RowChunkNode : Node {
  RowFn fn;
  int64_t rows = 0;             // per chunk
  std::vector<RngState> rng;    // before each chunk's forward
  DType autocast = DType::f32;  // the forward's mode, restored for the recompute
  bool x_requires_grad = false;

  int64_t chunks(int64_t n) const { return (n + rows - 1) / rows; }

  // Recomputes each chunk of x on a private tape, seeds its output with seed(c, r0, m, out)
  // and backpropagates; returns the node's gradients: dx (N, C) in x's dtype (undefined
  // when x needs none), then nothing for the parameter edges (their gradients accumulated
  // in the inner backward).
  template <typename Seed>
  std::vector<Tensor> recompute(const Seed& seed) {
    const Tensor& x = saved[0];  // (N, C)
    const int64_t n = x.size(0);
    Generator& gen = default_generator();
    const RngState after_forward = gen.state();
    Tensor dx;
    if (x_requires_grad) dx = Tensor::empty(x.shape(), x.dtype(), x.device());
    for (int64_t c = 0; c < chunks(n); ++c) {
      const int64_t r0 = c * rows, m = std::min(rows, n - r0);
      TapeScope tape;
      GradModeGuard grad_on(true);
      AutocastGuard mode(autocast);
      MemoryContextScope ctx(MemoryContext{Category::activation, context.label});
      gen.set_state(rng[size_t(c)]);
      Tensor xc = detach(x.narrow(0, r0, m));  // (m, C)
      if (x_requires_grad) {
        set_requires_grad(xc);
        ensure_meta(xc).grad_category = Category::temporary;
      }
      Tensor out = fn(xc);
      Tensor g = seed(c, r0, m, out);
      if (requires_grad(out)) backward({out}, {g}, /*fire_hooks=*/false);
      if (x_requires_grad) {
        const Tensor gx = grad(xc);
        if (gx.defined())
          dx.narrow(0, r0, m).copy_(gx);
        else
          dx.narrow(0, r0, m).fill_(0.0);
      }
    }
    gen.set_state(after_forward);
    std::vector<Tensor> grads(next.size());
    grads[0] = dx;
    return grads;
  }
};

struct TiledRowsNode final : RowChunkNode {
  const char* name() const override { return "tiled_rows"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    const Tensor& dy = g[0];  // (N, C')
    return recompute([&](int64_t, int64_t r0, int64_t m, const Tensor&) {
      return dy.defined() ? dy.narrow(0, r0, m) : Tensor();
    });
  }
};

struct ChunkedHeadNode final : RowChunkNode {
  int64_t ignore_index = -100;
  // saved[1]: targets (N) i64, saved[2]: lse (N) f32, saved[3]: the statistics.
  const char* name() const override { return "chunked_head_cross_entropy"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    const Tensor &t64 = saved[1], &lse = saved[2], &stats = saved[3];
    const Tensor& dloss = g[0];  // ()
    return recompute([&](int64_t, int64_t r0, int64_t m, const Tensor& logits) {
      // The chunk's logits are read by nothing after this (a head's backward needs its
      // input and weight, not its output), so their gradient is written over them when
      // no node saved them (Note [Cross-entropy gradient over the logits]).
      const bool sole = logits.storage() && logits.storage().use_count() == 1;
      return ops::cross_entropy_backward(dloss, logits, t64.narrow(0, r0, m), lse.narrow(0, r0, m),
                                         stats, ignore_index, sole);
    });
  }
};

struct TokenLogprobsNode final : RowChunkNode {
  // saved[1]: targets with a valid class in ignored rows (N) i64, saved[2]: 1 where the
  // target counts, else 0 (N) f32, saved[3]: lse (N) f32, saved[4]: the statistics.
  const char* name() const override { return "chunked_head_token_logprobs"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    const Tensor &safe = saved[1], &valid = saved[2], &lse = saved[3], &stats = saved[4];
    const int64_t n = safe.numel();
    // d log p(t_i) / d logits_i = -(softmax - onehot): each row's factor -dlogp_i, 0 where
    // ignored (Note [Fused head and per-token log-probabilities]).
    const Tensor coef = g[0].defined() ? ops::neg(ops::mul(g[0], valid))
                                       : Tensor::zeros({n}, DType::f32, valid.device());  // (N)
    // The count of rows, so that cross_entropy_backward's dloss / count is 1.
    const Tensor rows_count = Tensor::full({}, double(n), DType::f32, valid.device());
    return recompute([&](int64_t, int64_t r0, int64_t m, const Tensor& logits) {
      const bool sole = logits.storage() && logits.storage().use_count() == 1;
      const Tensor d = ops::cross_entropy_backward(rows_count, logits, safe.narrow(0, r0, m),
                                                   lse.narrow(0, r0, m), stats, -100, sole);
      return ops::mul(d, coef.narrow(0, r0, m).reshape({m, 1}).to(d.dtype()));  // (m, V)
    });
  }
};

void check_rows(const char* op, const Tensor& x, int64_t rows) {
  FG_CHECK(x.defined() && x.dim() == 2, "[{}] x must be (N, C), got {}", op,
           x.defined() ? shape_str(x.shape()) : "undefined");
  FG_CHECK(rows >= 1, "[{}] {} rows per chunk (need >= 1)", op, rows);
}

// Records node (which saved x first) for x -> outs, with edges to the parameters fn used.
void record_chunks(const std::shared_ptr<RowChunkNode>& node, const Tensor& x,
                   std::vector<Tensor> outs, const LeafCollector& leaves) {
  node->autocast = autocast_dtype();
  node->x_requires_grad = requires_grad(x);
  record(node, std::vector<Tensor>{x}, outs);
  for (const auto& leaf : leaves.leaves()) node->next.push_back(Edge{leaf, nullptr, 0});
}

// The category that what fn allocates in forward is charged to (as in checkpoint()).
Category forward_category() {
  const MemoryContext ctx = current_memory_context();
  return grad_enabled() && ctx.category == Category::other ? Category::activation : ctx.category;
}

void check_targets(const char* op, const Tensor& x, const Tensor& targets) {
  FG_CHECK(targets.defined() && targets.dim() == 1 && targets.size(0) == x.size(0),
           "[{}] targets must be ({}) for x {}, got {}", op, x.size(0), shape_str(x.shape()),
           targets.defined() ? shape_str(targets.shape()) : "undefined");
}

// The forward of the fused heads: head over x's chunks of node.rows rows, in row order, with
// grad off and charged as the forward's, noting each chunk's generator state in node (the
// parameters head uses go to the caller's LeafCollector); take(r0, m, logits) consumes the
// chunk's logits (m, V).
template <typename Take>
void head_chunks(RowChunkNode& node, const Tensor& x, const Take& take) {
  CategoryScope cat(forward_category());
  NoGradGuard no_grad;
  const int64_t n = x.size(0);
  for (int64_t r0 = 0; r0 < n; r0 += node.rows) {
    const int64_t m = std::min(node.rows, n - r0);
    node.rng.push_back(default_generator().state());
    take(r0, m, node.fn(x.narrow(0, r0, m)));
  }
}

// Whether a fused head's node is recorded: grad mode on, and x or a parameter of the head
// needing a gradient.
bool head_records(const Tensor& x, const LeafCollector& leaves) {
  return grad_enabled() && (requires_grad(x) || !leaves.leaves().empty());
}

}  // namespace

int64_t even_chunk_rows(int64_t n, int64_t target) {
  FG_CHECK(target >= 1, "[row chunks] target {} rows per chunk (need >= 1)", target);
  if (n <= 0) return 1;
  const int64_t parts = (n + target - 1) / target;
  return (n + parts - 1) / parts;
}

Tensor tiled_rows(const RowFn& fn, const Tensor& x, int64_t rows) {
  check_rows("tiled_rows", x, rows);
  const int64_t n = x.size(0);
  auto node = std::make_shared<TiledRowsNode>();
  node->fn = fn;
  node->rows = rows;
  Tensor y;  // (N, C')
  LeafCollector leaves;
  {
    CategoryScope cat(forward_category());
    NoGradGuard no_grad;
    for (int64_t r0 = 0; r0 < n || (n == 0 && r0 == 0); r0 += rows) {
      node->rng.push_back(default_generator().state());
      const Tensor yc = fn(x.narrow(0, r0, std::min(rows, n - r0)));  // (m, C')
      FG_CHECK(yc.dim() == 2 && yc.size(0) == std::min(rows, n - r0),
               "[tiled_rows] fn mapped {} rows to {}; it must keep the rows",
               std::min(rows, n - r0), shape_str(yc.shape()));
      if (!y.defined()) y = Tensor::empty({n, yc.size(1)}, yc.dtype(), yc.device());
      if (n == 0) break;
      y.narrow(0, r0, yc.size(0)).copy_(yc);
    }
  }
  if (!grad_enabled() || (!requires_grad(x) && leaves.leaves().empty())) return y;
  node->save(x);
  record_chunks(node, x, {y}, leaves);
  return y;
}

Tensor chunked_head_cross_entropy(const RowFn& head, const Tensor& x, const Tensor& targets,
                                  int64_t chunk, int64_t ignore_index) {
  const char* op = "chunked_head_cross_entropy";
  check_rows(op, x, chunk);
  check_targets(op, x, targets);
  const int64_t n = x.size(0);
  auto node = std::make_shared<ChunkedHeadNode>();
  node->fn = head;
  node->rows = chunk;
  node->ignore_index = ignore_index;
  const Tensor t64 = targets.to(DType::i64).contiguous();  // (N)
  ops::CrossEntropyOut ce = ops::cross_entropy_begin(n, x.device());
  LeafCollector leaves;
  head_chunks(*node, x, [&](int64_t r0, int64_t m, const Tensor& logits) {
    ops::cross_entropy_add_rows(ce, logits, t64.narrow(0, r0, m), r0, ignore_index);
  });
  if (!head_records(x, leaves)) return ce.loss;
  node->save(x);
  node->save(t64);
  node->save(ce.lse);
  node->save(ce.stats);
  record_chunks(node, x, {ce.loss}, leaves);
  return ce.loss;
}

Tensor chunked_head_token_logprobs(const RowFn& head, const Tensor& x, const Tensor& targets,
                                   int64_t chunk, int64_t ignore_index, Tensor* entropy) {
  const char* op = "chunked_head_token_logprobs";
  check_rows(op, x, chunk);
  check_targets(op, x, targets);
  const int64_t n = x.size(0);
  const Device device = x.device();
  // Ignored rows take a class other than ignore_index, so the accumulation counts them too.
  const int64_t stand_in = ignore_index == 0 ? 1 : 0;
  std::vector<int64_t> safe_host;  // (N)
  std::vector<float> valid_host;   // (N)
  Tensor safe, valid;
  if (device.has_bytes()) {
    safe_host = targets.to_vector<int64_t>();
    valid_host.resize(size_t(n));
    for (size_t i = 0; i < safe_host.size(); ++i) {
      valid_host[i] = safe_host[i] == ignore_index ? 0.0f : 1.0f;
      if (safe_host[i] == ignore_index) safe_host[i] = stand_in;
    }
    safe = Tensor::from_vector(safe_host, {n}, DType::i64, device);
    valid = Tensor::from_vector(valid_host, {n}, DType::f32, device);
  } else {
    safe = Tensor::empty({n}, DType::i64, device);
    valid = Tensor::empty({n}, DType::f32, device);
  }
  auto node = std::make_shared<TokenLogprobsNode>();
  node->fn = head;
  node->rows = chunk;
  ops::CrossEntropyOut ce = ops::cross_entropy_begin(n, device);
  const Tensor out = Tensor::empty({n}, DType::f32, device);  // (N)
  Tensor ent;
  if (entropy) ent = Tensor::empty({n}, DType::f32, device);  // (N)
  LeafCollector leaves;
  head_chunks(*node, x, [&](int64_t r0, int64_t m, const Tensor& chunk_logits) {
    const Tensor logits = chunk_logits.contiguous();  // (m, V)
    const int64_t v = logits.size(1);
    ops::cross_entropy_add_rows(ce, logits, safe.narrow(0, r0, m), r0, ignore_index);
    // Row i's target logit is element i V + t_i of the logits seen as (m V, 1).
    Tensor at;  // (m) i64
    if (device.has_bytes()) {
      std::vector<int64_t> flat(static_cast<size_t>(m));
      for (int64_t i = 0; i < m; ++i) flat[size_t(i)] = i * v + safe_host[size_t(r0 + i)];
      at = Tensor::from_vector(flat, {m}, DType::i64, device);
    } else {
      at = Tensor::empty({m}, DType::i64, device);
    }
    const Tensor picked = ops::embedding(logits.reshape({m * v, 1}), at).reshape({m});
    const Tensor lse = ce.lse.narrow(0, r0, m), ok = valid.narrow(0, r0, m);  // (m)
    out.narrow(0, r0, m).copy_(ops::mul(ops::sub(picked.to(DType::f32), lse), ok));
    if (entropy) {
      const Tensor l32 = logits.to(DType::f32);                                      // (m, V)
      const Tensor mean_logit = ops::sum(ops::mul(ops::softmax(l32, 1), l32), {1});  // (m)
      ent.narrow(0, r0, m).copy_(ops::mul(ops::sub(lse, mean_logit), ok));
    }
  });
  if (entropy) *entropy = ent;
  if (!head_records(x, leaves)) return out;
  node->save(x);
  node->save(safe);
  node->save(valid);
  node->save(ce.lse);
  node->save(ce.stats);
  record_chunks(node, x, {out}, leaves);
  return out;
}

}  // namespace fitgrad::autograd
