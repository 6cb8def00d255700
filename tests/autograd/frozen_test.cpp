// Frozen inputs (Note [Frozen inputs] in autograd/node.h): a Linear or matmul whose weight
// does not require grad computes only the input's gradient: one GEMM in backward instead of
// two (counted through backend::dispatch_count), no weight gradient, and its input is not
// kept alive for a dW that will never be formed. The gradients that are computed equal
// those of the fully trainable op bit for bit.
#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/memory/caching_allocator.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::autograd {
namespace {

using backend::OpId;
using testing::random_tensor;
using testing::to_f64;

Tensor leaf(const Shape& shape, uint64_t seed, bool trainable) {
  Tensor t = random_tensor(shape, seed);
  if (trainable) set_requires_grad(t);
  return t;
}

int64_t allocated_now() {
  return allocator_for(Device::cpu()).stats().allocated_bytes[kAllPools].current;
}

struct LinearGrads {
  Tensor dx, dw, db;
  uint64_t matmuls = 0, sums = 0;  // backward dispatches
};

// y = x W^T + b, loss = sum(y * r), backward; which of x, W, b require grad is given.
LinearGrads linear_run(bool gx, bool gw, bool gb) {
  const Tensor x = leaf({6, 5, 16}, 1, gx), w = leaf({24, 16}, 2, gw), b = leaf({24}, 3, gb);
  const Tensor r = random_tensor({6, 5, 24}, 4);
  const Tensor loss = sum(mul(linear(x, w, b), r));
  const uint64_t mm = backend::dispatch_count(OpId::matmul);
  const uint64_t sums = backend::dispatch_count(OpId::sum);
  backward({loss});
  return {gx ? grad(x) : Tensor(), gw ? grad(w) : Tensor(), gb ? grad(b) : Tensor(),
          backend::dispatch_count(OpId::matmul) - mm, backend::dispatch_count(OpId::sum) - sums};
}

TEST(FrozenInputs, LinearComputesOnlyTheGradientsThatAreNeeded) {
  const LinearGrads all = linear_run(true, true, true);
  EXPECT_EQ(all.matmuls, 2u);  // dX and dW
  EXPECT_EQ(all.sums, 1u);     // db (the loss's sum backward is an expand)
  const LinearGrads frozen = linear_run(true, false, false);
  EXPECT_EQ(frozen.matmuls, 1u) << "a frozen weight gets no dW GEMM";
  EXPECT_EQ(frozen.sums, 0u) << "a frozen bias gets no column sum";
  EXPECT_FALSE(frozen.dw.defined());
  EXPECT_EQ(to_f64(frozen.dx), to_f64(all.dx));
  const LinearGrads input_frozen = linear_run(false, true, true);
  EXPECT_EQ(input_frozen.matmuls, 1u) << "an input that needs no gradient gets no dX GEMM";
  EXPECT_EQ(to_f64(input_frozen.dw), to_f64(all.dw));
  EXPECT_EQ(to_f64(input_frozen.db), to_f64(all.db));
}

TEST(FrozenInputs, MatmulComputesOnlyTheGradientsThatAreNeeded) {
  for (bool shared_b : {false, true}) {  // (B, T, C) @ (C, N), or batched both sides
    SCOPED_TRACE(shared_b ? "shared 2-d b" : "batched b");
    const Shape sb = shared_b ? Shape{16, 24} : Shape{6, 16, 24};
    auto run = [&](bool ga, bool gb) {
      const Tensor a = leaf({6, 5, 16}, 5, ga), b = leaf(sb, 6, gb);
      const Tensor loss = sum(mul(matmul(a, b), random_tensor({6, 5, 24}, 7)));
      const uint64_t mm = backend::dispatch_count(OpId::matmul);
      backward({loss});
      return std::make_tuple(ga ? grad(a) : Tensor(), gb ? grad(b) : Tensor(),
                             backend::dispatch_count(OpId::matmul) - mm);
    };
    const auto [da, db, both] = run(true, true);
    EXPECT_EQ(both, 2u);
    const auto [da_only, none_b, one_a] = run(true, false);
    EXPECT_EQ(one_a, 1u);
    EXPECT_EQ(to_f64(da_only), to_f64(da));
    const auto [none_a, db_only, one_b] = run(false, true);
    EXPECT_EQ(one_b, 1u);
    EXPECT_EQ(to_f64(db_only), to_f64(db));
  }
}

// A frozen weight's Linear keeps only the weight (an alias, no bytes) for dX: once the
// caller drops its input, the input's bytes are gone; a trainable weight keeps them for dW.
TEST(FrozenInputs, AFrozenLinearDoesNotKeepItsInputAlive) {
  for (bool trainable : {false, true}) {
    const Tensor w = leaf({24, 16}, 2, trainable);
    Tensor x = leaf({64, 16}, 1, true);
    const int64_t x_bytes = int64_t(round_request(size_t(x.numel()) * 4));
    const Tensor y = linear(x, w, Tensor());
    const int64_t before = allocated_now();
    x = Tensor();
    EXPECT_EQ(before - allocated_now(), trainable ? 0 : x_bytes) << "trainable " << trainable;
    backward({sum(y)});
  }
}

}  // namespace
}  // namespace fitgrad::autograd
