// The per-step weight cache (Note [Autocast weight cache] in autograd/autocast_cache.h): with a
// scope alive a weight is cast once however often it is used, by forwards, micro-batches or a
// checkpoint's recompute, as the ledger shows (one parameter-category allocation labelled
// "<name>.bf16"); its gradients equal those of the uncached casts bit for bit; an in-place
// write to the weight makes the next use cast again; a nested scope defers to the outer one.
#include "autograd/autocast_cache.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>

#include "autograd/autocast.h"
#include "autograd/autocast_rules.h"
#include "autograd/checkpoint.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/ops/optim_update.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::autograd {
namespace {

using backend::OpId;

// y = x W^T under the thread's autocast mode, as nn::Linear takes it.
Tensor product(const Tensor& x, const Tensor& w) {
  const std::vector<Tensor> in = autocast_operands(OpId::linear, {x, w});
  return linear(in[0], in[1], Tensor());
}

// A named f32 weight (4, 6) that requires grad.
Tensor make_weight(const std::string& name) {
  Tensor w = testing::random_tensor({4, 6}, 21);
  set_requires_grad(w);
  set_name(w, name);
  return w;
}

// Allocations on the CPU since event `first` with this category and label.
int count_allocs(uint64_t first, Category category, const std::string& label) {
  int n = 0;
  for (const MemoryEvent& e : allocator_for(Device::cpu()).events())
    if (e.seq >= first && e.kind == EventKind::alloc && e.category == category &&
        label_text(e.label) == label)
      ++n;
  return n;
}

// grad(w) after `run` under bf16 autocast, with or without a cache scope around it.
std::vector<float> grads_of(const Tensor& w, bool cached, const std::function<void()>& run) {
  clear_grad(w);
  {
    AutocastGuard guard(DType::bf16);
    std::optional<AutocastCacheScope> scope;
    if (cached) scope.emplace();
    run();
  }
  return grad(w).to_vector<float>();
}

// Input k (3, 6): the same values at every call, made afresh so that no test leaves a block
// live in the CPU allocator for the rest of the process (a later test's trace would differ).
Tensor input(int k) { return testing::random_tensor({3, 6}, uint64_t(31 + k)); }

TEST(AutocastCache, TwoForwardsCastTheWeightOnce) {
  const Tensor w = make_weight("cache_test.two_forwards.weight");
  const uint64_t first = allocator_for(Device::cpu()).total_events();
  AutocastGuard guard(DType::bf16);
  AutocastCacheScope scope;
  const Tensor y0 = product(input(0), w), y1 = product(input(1), w);
  EXPECT_EQ(scope.casts(), 1);
  EXPECT_EQ(scope.size(), 1u);
  EXPECT_EQ(count_allocs(first, Category::parameter, "cache_test.two_forwards.weight.bf16"), 1);
  // Each use is its own tensor: the two products do not share autograd data.
  backward(add(sum(y0), sum(y1)));
  EXPECT_EQ(grad(w).dtype(), DType::f32);
}

TEST(AutocastCache, WithoutAScopeEachUseCasts) {
  const Tensor w = make_weight("cache_test.uncached.weight");
  const uint64_t first = allocator_for(Device::cpu()).total_events();
  AutocastGuard guard(DType::bf16);
  const Tensor y0 = product(input(0), w), y1 = product(input(1), w);
  EXPECT_EQ(count_allocs(first, Category::parameter, "cache_test.uncached.weight.bf16"), 0);
  backward(add(sum(y0), sum(y1)));
}

TEST(AutocastCache, GradientsEqualTheUncachedOnes) {
  const Tensor w = make_weight("cache_test.grads.weight");
  auto two_uses = [&] {
    backward(add(sum(mul(product(input(0), w), product(input(0), w))), sum(product(input(1), w))));
  };
  const std::vector<float> uncached = grads_of(w, false, two_uses);
  const std::vector<float> cached = grads_of(w, true, two_uses);
  EXPECT_EQ(cached, uncached);
}

TEST(AutocastCache, AccumulationOverTwoMicroBatchesMatchesAndCastsOnce) {
  const Tensor w = make_weight("cache_test.accumulation.weight");
  int64_t casts = -1;
  auto two_micro_batches = [&](AutocastCacheScope* scope) {
    for (int m = 0; m < 2; ++m) backward(scale(sum(product(input(m), w)), 0.5));
    if (scope) casts = scope->casts();
  };
  std::vector<float> uncached;
  {
    clear_grad(w);
    AutocastGuard guard(DType::bf16);
    two_micro_batches(nullptr);
    uncached = grad(w).to_vector<float>();
  }
  clear_grad(w);
  {
    AutocastGuard guard(DType::bf16);
    AutocastCacheScope scope;
    two_micro_batches(&scope);
  }
  EXPECT_EQ(casts, 1);
  EXPECT_EQ(grad(w).to_vector<float>(), uncached);
}

// The checkpoint's forward (grad mode off) makes the copy; its recompute in backward reuses it.
TEST(AutocastCache, CheckpointRecomputeReusesTheCopy) {
  const Tensor w = make_weight("cache_test.checkpoint.weight");
  auto fn = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{gelu(product(in[0], w))};
  };
  const std::vector<float> plain = grads_of(w, false, [&] { backward(sum(fn({input(0)})[0])); });
  clear_grad(w);
  const uint64_t first = allocator_for(Device::cpu()).total_events();
  {
    AutocastGuard guard(DType::bf16);
    AutocastCacheScope scope;
    const Tensor y = checkpoint(fn, {input(0)})[0];
    EXPECT_EQ(scope.casts(), 1);
    backward(sum(y));
    EXPECT_EQ(scope.casts(), 1);
  }
  EXPECT_EQ(count_allocs(first, Category::parameter, "cache_test.checkpoint.weight.bf16"), 1);
  EXPECT_EQ(grad(w).to_vector<float>(), plain);
}

TEST(AutocastCache, AnInPlaceWriteToTheWeightCastsAgain) {
  const Tensor w = make_weight("cache_test.write.weight");
  AutocastGuard guard(DType::bf16);
  AutocastCacheScope scope;
  {
    NoGradGuard no_grad;
    product(input(0), w);
    ops::scale_(w, 0.5f);
    const Tensor y = product(input(0), w);
    EXPECT_EQ(scope.casts(), 2);
    // The second product reads the halved weight.
    const Tensor ref = linear(input(0).to(DType::bf16), w.to(DType::bf16), Tensor());
    EXPECT_EQ(y.to_vector<float>(), ref.to_vector<float>());
  }
}

TEST(AutocastCache, OnlyParametersAreCachedAndANestedScopeDefers) {
  const Tensor w = make_weight("cache_test.nested.weight");
  const Tensor x = testing::random_tensor({3, 6}, 33);  // an activation: no grad
  AutocastGuard guard(DType::bf16);
  NoGradGuard no_grad;
  AutocastCacheScope outer;
  {
    AutocastCacheScope inner;
    product(x, w);
    product(x, w);
    EXPECT_EQ(inner.casts(), 0);
  }
  EXPECT_EQ(outer.casts(), 1);  // w only, and still held after the inner scope ended
  EXPECT_EQ(outer.size(), 1u);
  product(x, w);
  EXPECT_EQ(outer.casts(), 1);
}

}  // namespace
}  // namespace fitgrad::autograd
