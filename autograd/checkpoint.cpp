// checkpoint() and the segment planner.
#include "autograd/checkpoint.h"

#include <cmath>

#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "tensor/random/generator.h"

namespace fitgrad::autograd {

namespace {

struct CheckpointNode final : Node {
  CheckpointFn fn;
  RngState rng;
  DType autocast = DType::f32;  // the mode the forward ran under, restored for the recompute
  std::vector<bool> input_requires_grad;

  const char* name() const override { return "checkpoint"; }

  std::vector<Tensor> apply(std::vector<Tensor>& grad_outputs) override {
    Generator& gen = default_generator();
    const RngState after_forward = gen.state();
    gen.set_state(rng);
    std::vector<Tensor> grads(next.size());
    {
      TapeScope tape;
      GradModeGuard grad_on(true);
      AutocastGuard mode(autocast);
      MemoryContextScope ctx(MemoryContext{Category::activation, context.label});
      std::vector<Tensor> xs;
      for (size_t i = 0; i < input_requires_grad.size(); ++i) {
        Tensor x = detach(saved[i]);
        if (input_requires_grad[i]) {
          set_requires_grad(x);
          ensure_meta(x).grad_category = Category::temporary;
        }
        xs.push_back(x);
      }
      std::vector<Tensor> outs = fn(xs);
      gen.set_state(after_forward);
      FG_CHECK(outs.size() == grad_outputs.size(),
               "[checkpoint] the function returned {} outputs on recompute but {} in forward",
               outs.size(), grad_outputs.size());
      std::vector<Tensor> roots, seeds;
      for (size_t k = 0; k < outs.size(); ++k) {
        if (!grad_outputs[k].defined() || !requires_grad(outs[k])) continue;
        roots.push_back(outs[k]);
        seeds.push_back(grad_outputs[k]);
      }
      if (!roots.empty()) backward(roots, seeds, /*fire_hooks=*/false);
      for (size_t i = 0; i < xs.size(); ++i)
        if (input_requires_grad[i]) grads[i] = grad(xs[i]);
    }
    return grads;  // parameter leaves got theirs directly from the inner backward
  }
};

}  // namespace

std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs) {
  const RngState rng = default_generator().state();
  std::vector<Tensor> outs;
  LeafCollector leaves;
  {
    // What fn allocates is the forward's activations (its outputs are saved by whatever
    // comes next), though nothing inside is recorded.
    const MemoryContext ctx = current_memory_context();
    CategoryScope cat(grad_enabled() && ctx.category == Category::other ? Category::activation
                                                                        : ctx.category);
    NoGradGuard no_grad;
    outs = fn(inputs);
  }
  const bool inputs_need = needs_record(inputs);
  if (!grad_enabled() || (!inputs_need && leaves.leaves().empty())) return outs;
  auto node = std::make_shared<CheckpointNode>();
  node->fn = fn;
  node->rng = rng;
  node->autocast = autocast_dtype();
  for (const Tensor& x : inputs) {
    node->input_requires_grad.push_back(x.defined() && requires_grad(x));
    node->save(x);
  }
  // Outputs must be tensors of their own: fn may return an input as it is.
  for (Tensor& o : outs) o = detach(o);
  record(node, inputs, outs);
  for (const auto& leaf : leaves.leaves()) node->next.push_back(Edge{leaf, nullptr, 0});
  return outs;
}

std::vector<std::pair<int64_t, int64_t>> plan_segments(int64_t blocks, const SegmentPlan& plan) {
  FG_CHECK(blocks >= 0, "[checkpoint] {} blocks", blocks);
  std::vector<std::pair<int64_t, int64_t>> out;
  auto even = [&](int64_t n) {
    FG_CHECK(n >= 1 && n <= std::max<int64_t>(blocks, 1),
             "[checkpoint] {} segments for {} blocks (need 1..{})", n, blocks, blocks);
    int64_t begin = 0;
    for (int64_t s = 0; s < n; ++s) {
      const int64_t len = blocks / n + (s < blocks % n ? 1 : 0);
      if (len > 0) out.emplace_back(begin, begin + len);
      begin += len;
    }
  };
  switch (plan.kind) {
    case SegmentPlan::Kind::none: break;
    case SegmentPlan::Kind::sqrt_blocks:
      if (blocks > 0) even(std::max<int64_t>(1, std::llround(std::sqrt(double(blocks)))));
      break;
    case SegmentPlan::Kind::count: even(plan.segments); break;
    case SegmentPlan::Kind::per_block: {
      const auto& ids = plan.segment_of_block;
      FG_CHECK(int64_t(ids.size()) == blocks,
               "[checkpoint] the per-block plan has {} entries for {} blocks", ids.size(), blocks);
      std::vector<int64_t> seen;
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t id = ids[size_t(b)];
        FG_CHECK(id >= -1, "[checkpoint] block {} has segment id {} (use -1 for none)", b, id);
        if (id < 0) continue;
        if (b > 0 && ids[size_t(b - 1)] == id) {
          out.back().second = b + 1;
          continue;
        }
        for (int64_t s : seen)
          FG_CHECK(s != id, "[checkpoint] segment {} is not one run of blocks (again at block {})",
                   id, b);
        seen.push_back(id);
        out.emplace_back(b, b + 1);
      }
      break;
    }
  }
  return out;
}

Tensor checkpoint_sequential(const std::vector<Block>& blocks, const Tensor& x,
                             const SegmentPlan& plan) {
  const auto segments = plan_segments(int64_t(blocks.size()), plan);
  Tensor h = x;
  int64_t b = 0;
  for (const auto& [begin, end] : segments) {
    for (; b < begin; ++b) h = blocks[size_t(b)](h);
    // The node keeps this function until backward, so it owns copies of its blocks.
    std::vector<Block> segment(blocks.begin() + begin, blocks.begin() + end);
    auto run = [segment = std::move(segment)](const std::vector<Tensor>& in) {
      Tensor y = in[0];
      for (const Block& block : segment) y = block(y);
      return std::vector<Tensor>{y};
    };
    h = checkpoint(run, {h})[0];
    b = end;
  }
  for (; b < int64_t(blocks.size()); ++b) h = blocks[size_t(b)](h);
  return h;
}

}  // namespace fitgrad::autograd
