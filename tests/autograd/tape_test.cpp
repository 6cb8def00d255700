// The tape: gradients of composed graphs against finite differences, what backward frees
// and when (seen through the ledger), accumulation, hooks, grad mode and misuse errors.
#include "autograd/tape.h"

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/lambda_node.h"
#include "autograd/variable.h"
#include "tensor/memory/caching_allocator.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::autograd {
namespace {

using fitgrad::testing::all_close;
using fitgrad::testing::max_abs;
using fitgrad::testing::random_tensor;
using fitgrad::testing::to_f64;
namespace ag = fitgrad::autograd;

int64_t allocated_now() {
  return allocator_for(Device::cpu()).stats().allocated_bytes[kAllPools].current;
}

// A pass-through op whose rule records the allocated bytes at the moment it runs.
Tensor probe(const Tensor& x, std::vector<int64_t>* seen) {
  Tensor out = own(x, x);
  if (!needs_record({&x})) return out;
  record(make_node("probe",
                   [seen](Node&, std::vector<Tensor>& g) {
                     seen->push_back(allocated_now());
                     return std::vector<Tensor>{g[0]};
                   }),
         {&x}, {&out});
  return out;
}

TEST(Tape, SavedTensorsAndIntermediateGradsAreFreedAsSoonAsUsed) {
  constexpr int64_t kBytes = 4096;  // (1024,) f32: an exact multiple of 512
  Tensor x = random_tensor({1024}, 1);
  set_requires_grad(x);
  std::vector<int64_t> seen;
  Tensor loss;
  {
    Tensor h = x;
    for (int i = 0; i < 6; ++i) h = probe(ag::exp(ag::scale(h, 0.1)), &seen);
    loss = ag::sum(h);
  }  // the forward's tensors are now held by the tape alone
  const int64_t before = allocated_now();
  backward(loss);
  ASSERT_EQ(seen.size(), 6u);
  // Between two probes one exp rule and one scale rule ran: exp released its saved output
  // and the gradient it consumed, leaving one new gradient. Net: one saved output less.
  // The first gradient in flight is sum's: a stride-0 view of one 512-byte scalar, so at
  // the first step the new full-size gradient replaces 512 bytes, not kBytes.
  EXPECT_EQ(seen[0] - seen[1], kBytes - (kBytes - 512));
  for (size_t i = 2; i < seen.size(); ++i)
    EXPECT_EQ(seen[i - 1] - seen[i], kBytes) << "probe " << i;
  EXPECT_EQ(current_tape().size(), 0u);
  // Nothing from the graph is retained: what remains is x's new gradient and the loss.
  EXPECT_EQ(allocated_now() - before, kBytes - 6 * kBytes);
  ASSERT_TRUE(grad(x).defined());
}

// Finite differences of a scalar function of one input, evaluated by fitgrad in f32: the
// wiring check (each op's own backward is checked against fp64 in tests/tensor/ops/).
// Note [Tape finite differences]
// fitgrad has no f64 dtype, so the forward is f32. A central difference D(h) has a
// truncation error ~h^2 f'''/6 and a rounding error ~eps_f32 |f| / h, which grows as h
// shrinks. The Richardson step (4 D(h/2) - D(h)) / 3 cancels the h^2 term, so h can grow to
// 2e-2, where rounding is ~1e-5 |f|, while the truncation falls to ~h^4 (and no kink of
// max is crossed). The graphs below then agree with the tape to 3e-4 of each gradient at
// worst (sqrt/rsqrt/pow, the largest |f|); the test allows 5e-4 of |want| plus 5e-4 of the
// largest |want|, where D(1e-2) alone needed 2e-3 absolute.
std::vector<double> numeric_grad(const std::function<Tensor(const Tensor&)>& f, const Tensor& x,
                                 double h) {
  std::vector<double> xv = to_f64(x), g(xv.size());
  const auto central = [&](size_t i, double step) {
    const double saved = xv[i];
    xv[i] = saved + step;
    const double up = f(Tensor::from_vector(xv, x.shape(), x.dtype())).item();
    xv[i] = saved - step;
    const double down = f(Tensor::from_vector(xv, x.shape(), x.dtype())).item();
    xv[i] = saved;
    return (up - down) / (2 * step);
  };
  for (size_t i = 0; i < xv.size(); ++i) g[i] = (4 * central(i, h / 2) - central(i, h)) / 3;
  return g;
}

struct GraphCase {
  const char* name;
  Shape shape;
  std::function<Tensor(const Tensor&)> f;  // scalar loss of x
};

TEST(Tape, ComposedGraphsMatchFiniteDifferences) {
  const Tensor w = random_tensor({5, 4}, 11), b = random_tensor({5}, 12),
               r = random_tensor({3, 5}, 13);
  const Tensor ln_w = random_tensor({4}, 14, DType::f32, 0.5, 1.5), ln_b = random_tensor({4}, 15);
  const Tensor ids = Tensor::from_vector(std::vector<int64_t>{2, 0, 1}, {3});
  const Tensor targets = Tensor::from_vector(std::vector<int64_t>{1, 4, 0}, {3});
  const GraphCase cases[] = {
      {"add/mul broadcast",
       {3, 4},
       [&](const Tensor& x) { return ag::sum(ag::mul(ag::add(x, ln_b), ag::sub(x, ln_w))); }},
      {"div/exp/log",
       {3, 4},
       [&](const Tensor& x) {
         return ag::sum(ag::log(ag::div(ag::exp(x), ag::add_scalar(ag::mul(x, x), 1.0))));
       }},
      {"tanh (Gemma's soft cap)",
       {3, 4},
       [&](const Tensor& x) {
         return ag::sum(ag::mul(ag::scale(ag::tanh(ag::scale(x, 0.5)), 3.0), ln_w));
       }},
      {"sqrt/rsqrt/pow",
       {3, 4},
       [&](const Tensor& x) {
         const Tensor p = ag::add_scalar(ag::mul(x, x), 0.5);
         return ag::sum(ag::add(ag::sqrt(p), ag::mul(ag::rsqrt(p), ag::pow(p, 1.5))));
       }},
      {"linear+gelu",
       {3, 4},
       [&](const Tensor& x) { return ag::sum(ag::mul(ag::gelu(ag::linear(x, w, b)), r)); }},
      {"matmul^T + silu",
       {3, 4},
       [&](const Tensor& x) {
         return ag::sum(ag::mul(ag::silu(ag::matmul(x, w, false, true)), r));
       }},
      {"swiglu",
       {3, 4},
       [&](const Tensor& x) { return ag::sum(ag::swiglu(x, ag::scale(x, -0.7))); }},
      {"layer_norm",
       {3, 4},
       [&](const Tensor& x) {
         return ag::sum(ag::mul(ag::layer_norm(x, ln_w, ln_b), ag::exp(x)));
       }},
      {"rms_norm",
       {3, 4},
       [&](const Tensor& x) { return ag::sum(ag::mul(ag::rms_norm(x, ln_w), x)); }},
      {"softmax/log_softmax",
       {3, 4},
       [&](const Tensor& x) {
         return ag::sum(ag::mul(ag::softmax(x, 1), ag::log_softmax(ag::scale(x, 2.0), 0)));
       }},
      {"mean/max/sum dims",
       {3, 4},
       [&](const Tensor& x) {
         return ag::add(ag::sum(ag::max(x, 1)), ag::sum(ag::mean(ag::mul(x, x), {0}, true), {1}));
       }},
      {"views",
       {3, 4},
       [&](const Tensor& x) {
         const Tensor left =
             ag::narrow(ag::transpose(ag::reshape(x, {2, 6}), 0, 1), 0, 1, 4);  // (4, 2)
         const Tensor col =
             ag::narrow(ag::permute(ag::reshape(ag::narrow(x, 1, 0, 2), {1, 6}), {1, 0}), 0, 0, 4);
         return ag::sum(ag::mul(left, ag::expand(ag::contiguous(col), {4, 2})));
       }},
      {"embedding",
       {3, 4},
       [&](const Tensor& x) {
         return ag::sum(ag::mul(ag::embedding(x, ids), ag::exp(ag::embedding(x, ids))));
       }},
      {"cross_entropy",
       {3, 5},
       [&](const Tensor& x) { return ag::cross_entropy(ag::scale(x, 3.0), targets); }},
      {"rope",
       {1, 2, 3, 4},
       [&](const Tensor& x) { return ag::sum(ag::mul(ag::rope(x, 1, 10000.0), ag::exp(x))); }},
      {"attention causal",
       {1, 2, 3, 4},
       [&](const Tensor& x) {
         return ag::sum(ag::mul(ag::attention(x, ag::scale(x, 0.5), ag::exp(x), true), x));
       }},
      {"dropout",
       {3, 4},
       [&](const Tensor& x) {
         default_generator().manual_seed(3);  // the same mask for every evaluation
         return ag::sum(ag::mul(ag::dropout(x, 0.3), ag::exp(x)));
       }},
  };
  for (const GraphCase& c : cases) {
    SCOPED_TRACE(c.name);
    Tensor x = random_tensor(c.shape, 21);
    set_requires_grad(x);
    backward(c.f(x));
    const Tensor dx = grad(x);
    ASSERT_TRUE(dx.defined());
    NoGradGuard no_grad;
    const std::vector<double> want = numeric_grad(c.f, detach(x), 2e-2);
    EXPECT_TRUE(all_close(to_f64(dx), want, 5e-4, 5e-4 * max_abs(want)));
  }
}

TEST(Tape, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = random_tensor({8}, 3);
  set_requires_grad(x);
  backward(ag::sum(ag::exp(x)));
  const auto once = to_f64(grad(x));
  backward(ag::sum(ag::exp(x)));
  const auto twice = to_f64(grad(x));
  for (size_t i = 0; i < once.size(); ++i) EXPECT_EQ(twice[i], 2 * once[i]);
  clear_grad(x);
  EXPECT_FALSE(grad(x).defined());
}

TEST(Tape, HooksFireOnceWithTheFinalGradient) {
  Tensor x = random_tensor({6}, 4), y = random_tensor({6}, 5);
  set_requires_grad(x);
  set_requires_grad(y);
  std::vector<std::vector<double>> fired_x;
  int fired_y = 0;
  add_grad_hook(x, [&](const Tensor& g, const GradHookContext&) { fired_x.push_back(to_f64(g)); });
  add_grad_hook(y, [&](const Tensor&, const GradHookContext&) { ++fired_y; });
  // x is used three times, y once; y's node runs first in backward.
  const Tensor a = ag::mul(x, x);
  const Tensor loss = ag::sum(ag::add(ag::add(a, ag::exp(x)), ag::mul(a, y)));
  backward(loss);
  ASSERT_EQ(fired_x.size(), 1u);
  EXPECT_EQ(fired_x[0], to_f64(grad(x)));
  EXPECT_EQ(fired_y, 1);
}

// Gradient hooks learn the micro-batch (MicroBatchScope): two accumulation micro-batches
// fire the hook twice, with indices 0 and 1, the second marked last; outside a scope a
// backward is micro-batch 0 and the last.
TEST(Tape, HooksReceiveTheMicroBatch) {
  Tensor w = random_tensor({5}, 7);
  set_requires_grad(w);
  std::vector<GradHookContext> seen;
  add_grad_hook(w, [&](const Tensor&, const GradHookContext& c) { seen.push_back(c); });
  for (int64_t m = 0; m < 2; ++m) {
    const MicroBatchScope micro_batch(m, m == 1);
    backward(ag::sum(ag::mul(w, w)));
  }
  backward(ag::sum(w));
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].micro_batch, 0);
  EXPECT_FALSE(seen[0].is_last_micro_batch);
  EXPECT_EQ(seen[1].micro_batch, 1);
  EXPECT_TRUE(seen[1].is_last_micro_batch);
  EXPECT_EQ(seen[2].micro_batch, 0);
  EXPECT_TRUE(seen[2].is_last_micro_batch);
  EXPECT_EQ(current_micro_batch().micro_batch, 0);
}

// Note [Saved tensor hooks]: under a scope, what nodes save goes through pack and comes back
// through unpack before the rule runs; here pack keeps a copy in other storage (as offload
// keeps a host copy), and the gradients equal those without hooks.
TEST(Tape, SavedTensorHooksPackAndUnpack) {
  Tensor x = random_tensor({7}, 8);
  set_requires_grad(x);
  backward(ag::sum(ag::mul(ag::exp(x), x)));
  const std::vector<double> want = to_f64(grad(x));
  clear_grad(x);
  int packed = 0, unpacked = 0;
  Tensor loss;
  {
    SavedTensorHooksScope hooks({[&](const Tensor& t) {
                                   ++packed;
                                   return t.contiguous().to(DType::f32).clone();
                                 },
                                 [&](const Tensor& t) {
                                   ++unpacked;
                                   return t;
                                 }});
    loss = ag::sum(ag::mul(ag::exp(x), x));
  }
  EXPECT_EQ(packed, 3);  // exp saves its output, mul both operands
  EXPECT_EQ(unpacked, 0);
  backward(loss);
  EXPECT_EQ(unpacked, 3);
  EXPECT_EQ(to_f64(grad(x)), want);
}

TEST(Tape, NoGradRecordsNothing) {
  Tensor x = random_tensor({4}, 6);
  set_requires_grad(x);
  Tensor y;
  {
    NoGradGuard no_grad;
    y = ag::exp(ag::mul(x, x));
  }
  EXPECT_FALSE(requires_grad(y));
  EXPECT_EQ(current_tape().size(), 0u);
}

TEST(Tape, MisuseGivesClearErrors) {
  Tensor x = random_tensor({4}, 7);
  set_requires_grad(x);
  const Tensor y = ag::exp(x);
  const Tensor loss = ag::sum(y);
  backward(loss);
  try {
    backward(loss);
    FAIL() << "a consumed graph was walked twice";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already consumed"), std::string::npos) << e.what();
  }
  const Tensor z = ag::exp(x);
  EXPECT_THROW(backward(z), Error);                      // not a scalar, no gradient given
  EXPECT_THROW(backward(random_tensor({1}, 1)), Error);  // nothing recorded leads to it
  current_tape().clear();
  EXPECT_THROW(set_requires_grad(z), Error);  // not a leaf
}

}  // namespace
}  // namespace fitgrad::autograd
