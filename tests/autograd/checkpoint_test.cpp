// Checkpointing: bitwise-equal gradients (dropout included, through the RNG state), the
// segment planner, hooks on parameters used inside a checkpoint, and the saved-activation
// memory of a 12-block stack against formulas written out here.
#include "autograd/checkpoint.h"

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "tensor/memory/caching_allocator.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::autograd {
namespace {

using fitgrad::testing::random_tensor;
using fitgrad::testing::to_f64;
namespace ag = fitgrad::autograd;

constexpr int64_t kRows = 16, kC = 64, kHidden = 256, kLayers = 12;

struct Stack {
  std::vector<Tensor> w1, w2;  // (kHidden, kC), (kC, kHidden) per block
  double dropout_p = 0.0;
  Stack() {
    for (int64_t l = 0; l < kLayers; ++l) {
      w1.push_back(random_tensor({kHidden, kC}, uint64_t(100 + l), DType::f32, -0.2, 0.2));
      w2.push_back(random_tensor({kC, kHidden}, uint64_t(200 + l), DType::f32, -0.2, 0.2));
      set_requires_grad(w1.back());
      set_requires_grad(w2.back());
    }
  }
  // x + W2 gelu(W1 x), optionally with dropout on the hidden layer.
  std::vector<Block> blocks() const {
    std::vector<Block> out;
    for (int64_t l = 0; l < kLayers; ++l) {
      out.push_back([this, l](const Tensor& x) {
        Tensor h = ag::gelu(ag::linear(x, w1[size_t(l)], Tensor()));
        if (dropout_p > 0) h = ag::dropout(h, dropout_p);
        return ag::add(x, ag::linear(h, w2[size_t(l)], Tensor()));
      });
    }
    return out;
  }
  std::vector<std::vector<double>> grads() const {
    std::vector<std::vector<double>> g;
    for (int64_t l = 0; l < kLayers; ++l) {
      g.push_back(to_f64(grad(w1[size_t(l)])));
      g.push_back(to_f64(grad(w2[size_t(l)])));
      clear_grad(w1[size_t(l)]);
      clear_grad(w2[size_t(l)]);
    }
    return g;
  }
};

// One forward + backward; returns the input's gradient and every weight gradient.
std::vector<std::vector<double>> run(Stack& stack, const SegmentPlan& plan) {
  default_generator().manual_seed(7);
  Tensor x = random_tensor({kRows, kC}, 1);
  set_requires_grad(x);
  backward(ag::sum(ag::mul(checkpoint_sequential(stack.blocks(), x, plan), ag::exp(x))));
  auto g = stack.grads();
  g.push_back(to_f64(grad(x)));
  return g;
}

TEST(Checkpoint, GradientsAreBitwiseEqualToThePlainRun) {
  for (double p : {0.0, 0.25}) {
    Stack stack;
    stack.dropout_p = p;
    const auto plain = run(stack, SegmentPlan::none());
    for (const SegmentPlan& plan :
         {SegmentPlan::sqrt_blocks(), SegmentPlan::count(kLayers),
          SegmentPlan::per_block({0, 0, -1, 1, 1, 1, -1, -1, 2, 3, 3, 3})}) {
      const auto ckpt = run(stack, plan);
      ASSERT_EQ(ckpt.size(), plain.size());
      for (size_t i = 0; i < plain.size(); ++i)
        EXPECT_EQ(ckpt[i], plain[i]) << "gradient " << i << " (dropout p " << p << ")";
    }
  }
}

TEST(Checkpoint, PlanSegments) {
  using P = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(plan_segments(12, SegmentPlan::sqrt_blocks()), (P{{0, 4}, {4, 8}, {8, 12}}));
  EXPECT_EQ(plan_segments(24, SegmentPlan::sqrt_blocks()),
            (P{{0, 5}, {5, 10}, {10, 15}, {15, 20}, {20, 24}}));
  EXPECT_EQ(plan_segments(12, SegmentPlan::count(5)),
            (P{{0, 3}, {3, 6}, {6, 8}, {8, 10}, {10, 12}}));
  EXPECT_EQ(plan_segments(12, SegmentPlan::none()), P{});
  EXPECT_EQ(plan_segments(5, SegmentPlan::per_block({0, 0, -1, 4, 4})), (P{{0, 2}, {3, 5}}));
  EXPECT_THROW(plan_segments(5, SegmentPlan::per_block({0, 1, 0, -1, -1})), Error);
  EXPECT_THROW(plan_segments(5, SegmentPlan::per_block({0, 1})), Error);
  EXPECT_THROW(plan_segments(5, SegmentPlan::count(6)), Error);
  EXPECT_THROW(plan_segments(5, SegmentPlan::count(0)), Error);
}

TEST(Checkpoint, HooksOnParametersInsideFireOnceWhenFinal) {
  Stack stack;
  int fired = 0;
  std::vector<double> at_hook;
  add_grad_hook(stack.w1[0], [&](const Tensor& g, const GradHookContext&) {
    ++fired;
    at_hook = to_f64(g);
  });
  Tensor x = random_tensor({kRows, kC}, 1);
  // w1[0] is used inside the first segment and once more outside it.
  Tensor y = checkpoint_sequential(stack.blocks(), x, SegmentPlan::sqrt_blocks());
  Tensor extra = ag::linear(y, stack.w1[0], Tensor());
  backward(ag::sum(ag::add(ag::sum(y), ag::sum(extra))));
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(at_hook, to_f64(grad(stack.w1[0])));
}

// Note [Activation formulas of the test stack]
// Per block, a plain run keeps the hidden pre-activation h and gelu(h) (kRows x kHidden f32
// each, saved by gelu and the second linear) and the block output (kRows x kC, saved by
// the next block): A = 2*H + X with H = 16 KiB and X = 4 KiB. All sizes are multiples of
// 512 B in the small pool, so blocks are exact. At the peak, besides the saved tensors,
// the last block's second linear output (X) is alive while the residual add makes its
// output. A checkpointed segment keeps only its input; recomputing one segment of k
// blocks in backward holds its k blocks' activations again, next to the saved segment
// inputs, the final output and one block output in flight. The scalar loss (one 512 B
// block, recorded as an activation) is alive during backward, where the checkpointed
// runs peak; the plain run peaks in forward, before the loss exists.
TEST(Checkpoint, SavedActivationMemoryFallsAsTheFormulasSay) {
  constexpr int64_t X = kRows * kC * 4, H = kRows * kHidden * 4, A = 2 * H + X, loss = 512;
  CachingAllocator& cpu = allocator_for(Device::cpu());
  Stack stack;
  auto measure = [&](const SegmentPlan& plan) {
    Tensor x = random_tensor({kRows, kC}, 1);
    set_requires_grad(x);
    cpu.reset_peak_stats();
    const int64_t base = cpu.by_category()[size_t(Category::activation)].current;
    backward(ag::sum(checkpoint_sequential(stack.blocks(), x, plan)));
    stack.grads();
    return cpu.by_category()[size_t(Category::activation)].peak - base;
  };
  const int64_t none = measure(SegmentPlan::none());
  const int64_t per_block = measure(SegmentPlan::count(kLayers));
  const int64_t sqrt_l = measure(SegmentPlan::sqrt_blocks());  // 3 segments of 4 blocks
  EXPECT_EQ(none, kLayers * A + X);
  // Per block: 11 saved segment inputs + the final output, then one block recomputed.
  EXPECT_EQ(per_block, kLayers * X + A + X + loss);
  // sqrt(L): 2 saved segment inputs + the final output, then 4 blocks recomputed.
  EXPECT_EQ(sqrt_l, 3 * X + 4 * A + X + loss);
  EXPECT_GE(double(none) / double(per_block), 4.0);
  EXPECT_LT(per_block, sqrt_l);
  EXPECT_LT(sqrt_l, none);
}

}  // namespace
}  // namespace fitgrad::autograd
