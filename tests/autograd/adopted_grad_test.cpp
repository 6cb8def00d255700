// Adopted gradients (Note [Adopted gradients] in autograd/tape.cpp): a parameter's first
// gradient that nothing else holds becomes the parameter's .grad without a copy; the ledger
// records the block's move from temporary to gradient (retag_from, retag_to) with its new
// label, and the gradient's bytes exist once. A gradient that two edges share is copied.
#include <gtest/gtest.h>

#include <string>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/memory/scope.h"
#include "tests/tensor/memory/events_since.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::autograd {
namespace {

using testing::random_tensor;
using testing::to_f64;

TEST(AdoptedGradients, TheFirstGradientIsRetaggedNotCopied) {
  Tensor w = random_tensor({96, 64}, 1);  // (out, in): dW is 24 KiB
  set_requires_grad(w);
  ensure_meta(w).name = "layer.weight";
  const Tensor x = random_tensor({32, 64}, 2);
  const Tensor loss = sum(linear(x, w, Tensor()));
  CachingAllocator& cpu = allocator_for(Device::cpu());
  const uint64_t first = cpu.total_events();
  const int64_t grad_before = cpu.by_category()[size_t(Category::gradient)].current;
  backward({loss});
  const uint64_t bytes = uint64_t(w.numel()) * 4;
  int dw_allocs = 0, from = 0, to = 0;
  for (const MemoryEvent& e : testing::events_since(first)) {
    if (e.kind == EventKind::alloc && e.requested == bytes) ++dw_allocs;
    if (e.kind == EventKind::retag_from && e.requested == bytes) {
      ++from;
      EXPECT_EQ(e.category, Category::temporary);
    }
    if (e.kind == EventKind::retag_to && e.requested == bytes) {
      ++to;
      EXPECT_EQ(e.category, Category::gradient);
      EXPECT_EQ(label_text(e.label), "layer.weight.grad");
    }
  }
  EXPECT_EQ(dw_allocs, 1) << "dW is formed once and kept, not copied into a second buffer";
  EXPECT_EQ(from, 1);
  EXPECT_EQ(to, 1);
  EXPECT_EQ(cpu.by_category()[size_t(Category::gradient)].current - grad_before,
            int64_t(round_request(bytes)));
  // The value: dW = 1^T x, each row of W's gradient the column sums of x.
  const std::vector<double> xs = to_f64(x), g = to_f64(grad(w));
  for (int64_t o = 0; o < 96; ++o)
    for (int64_t i = 0; i < 64; ++i) {
      double want = 0;
      for (int64_t r = 0; r < 32; ++r) want += xs[size_t(r * 64 + i)];
      ASSERT_NEAR(g[size_t(o * 64 + i)], want, 1e-4) << o << ", " << i;
    }
  // A second backward accumulates into the adopted buffer.
  backward({sum(linear(x, w, Tensor()))});
  EXPECT_NEAR(to_f64(grad(w))[0], 2 * g[0], 1e-4);
}

TEST(AdoptedGradients, AGradientSharedByTwoLeavesIsCopied) {
  Tensor a = random_tensor({8, 8}, 3), b = random_tensor({8, 8}, 4);
  set_requires_grad(a);
  set_requires_grad(b);
  const Tensor r = random_tensor({8, 8}, 5);
  const Tensor loss = sum(mul(add(a, b), r));  // d/da = d/db = r: one tensor for both edges
  backward({loss});
  EXPECT_EQ(to_f64(grad(a)), to_f64(r));
  EXPECT_EQ(to_f64(grad(b)), to_f64(r));
  EXPECT_NE(grad(a).storage(), grad(b).storage()) << "each leaf owns its gradient";
}

}  // namespace
}  // namespace fitgrad::autograd
