// Row-chunked recompute (autograd/row_chunks.h): tiled_rows and the fused, chunked head and
// loss against the plain autograd ops (float tolerance: only the order of the weight
// gradients' sums over rows differs), the generator replayed per tile, parameter hooks
// firing once with the final gradient, and the peak memory falling to one chunk (also for the
// per-token log-probabilities, whose values token_logprobs_test.cpp checks).
#include "autograd/row_chunks.h"

#include <cmath>
#include <functional>

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

constexpr int64_t kN = 37, kC = 24, kHidden = 96, kV = 131;

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(got[i] - want[i]) / (1.0 + std::abs(want[i]));
    if (!(err <= worst)) worst = err, at = i;
  }
  EXPECT_LE(worst, tol) << what << ": element " << at << " is " << got[at] << ", want " << want[at];
}

// A per-row MLP with a residual: x + W2 gelu(W1 layer_norm(x)).
struct Mlp {
  Tensor w1 = random_tensor({kHidden, kC}, 11, DType::f32, -0.3, 0.3);
  Tensor w2 = random_tensor({kC, kHidden}, 12, DType::f32, -0.3, 0.3);
  Tensor g = random_tensor({kC}, 13, DType::f32, 0.5, 1.5);
  Tensor b = random_tensor({kC}, 14);
  Mlp() {
    for (Tensor* t : {&w1, &w2, &g, &b}) set_requires_grad(*t);
  }
  Tensor operator()(const Tensor& x) const {
    const Tensor h = ag::gelu(ag::linear(ag::layer_norm(x, g, b), w1, Tensor()));
    return ag::add(x, ag::linear(h, w2, Tensor()));
  }
  // The gradients of x and of every weight, cleared for the next run.
  std::vector<std::vector<double>> take(const Tensor& x) const {
    std::vector<std::vector<double>> out{to_f64(grad(x))};
    for (const Tensor* t : {&w1, &w2, &g, &b}) {
      out.push_back(to_f64(grad(*t)));
      clear_grad(*t);
    }
    return out;
  }
};

TEST(TiledRows, OutputAndGradientsEqualTheUntiledFunction) {
  Mlp mlp;
  const Tensor w = random_tensor({kN, kC}, 3);  // weights the output for a non-trivial loss
  auto run = [&](int64_t rows) {
    Tensor x = random_tensor({kN, kC}, 2);
    set_requires_grad(x);
    const Tensor y = rows == 0 ? mlp(x) : tiled_rows(mlp, x, rows);
    std::vector<double> out = to_f64(y);
    backward(ag::sum(ag::mul(y, w)));
    auto grads = mlp.take(x);
    grads.push_back(out);
    return grads;
  };
  const auto plain = run(0);
  for (int64_t rows : {int64_t(1), int64_t(5), int64_t(16), kN, int64_t(100)}) {
    const auto tiled = run(rows);
    for (size_t i = 0; i < plain.size(); ++i)
      expect_close(tiled[i], plain[i], 1e-5,
                   "rows " + std::to_string(rows) + ", result " + std::to_string(i));
  }
}

TEST(TiledRows, EachTileReplaysItsOwnDropoutMask) {
  // y = 3 dropout(x): with dy = 1, dx = 3 mask / (1 - p) = y / x wherever x != 0, so dx
  // matches y only if the recompute drew each tile's forward mask again.
  default_generator().manual_seed(5);
  Tensor x = random_tensor({kN, kC}, 4, DType::f32, 0.5, 1.5);
  set_requires_grad(x);
  const Tensor y =
      tiled_rows([](const Tensor& t) { return ag::scale(ag::dropout(t, 0.4), 3.0); }, x, 6);
  backward(ag::sum(y));
  const auto yv = to_f64(y), xv = to_f64(x), dx = to_f64(grad(x));
  int64_t dropped = 0;
  for (size_t i = 0; i < yv.size(); ++i) {
    EXPECT_NEAR(dx[i] * xv[i], yv[i], 1e-5) << "element " << i;
    dropped += yv[i] == 0.0;
  }
  EXPECT_GT(dropped, 0);
  EXPECT_LT(dropped, int64_t(yv.size()));
}

TEST(TiledRows, RejectsBadTilesAndFunctionsThatChangeTheRows) {
  const Tensor x = random_tensor({4, 3}, 1);
  EXPECT_THROW(tiled_rows([](const Tensor& t) { return t; }, x, 0), Error);
  EXPECT_THROW(tiled_rows([](const Tensor& t) { return ag::sum(t); }, x, 2), Error);
}

struct Head {
  Tensor w = random_tensor({kV, kC}, 21, DType::f32, -0.5, 0.5);  // (V, C)
  Head() { set_requires_grad(w); }
  Tensor operator()(const Tensor& x) const { return ag::matmul(x, w, false, true); }
};

// Targets in [0, V) with every fifth one ignored.
Tensor targets(int64_t n, uint64_t seed) {
  std::vector<double> t;
  for (int64_t i = 0; i < n; ++i)
    t.push_back(i % 5 == 3 ? -100.0 : double((seed * 2654435761u + uint64_t(i) * 97) % kV));
  return Tensor::from_vector(t, {n}, DType::i64);
}

TEST(ChunkedHead, LossAndGradientsEqualTheUnfusedHeadAndLoss) {
  Head head;
  const Tensor t = targets(kN, 9);
  auto run = [&](int64_t chunk, double scale) {
    Tensor x = random_tensor({kN, kC}, 8);
    set_requires_grad(x);
    const Tensor loss =
        chunk == 0 ? ag::cross_entropy(head(x), t) : chunked_head_cross_entropy(head, x, t, chunk);
    const std::vector<double> value = to_f64(loss);
    backward(ag::scale(loss, scale));
    std::vector<std::vector<double>> out{value, to_f64(grad(x)), to_f64(grad(head.w))};
    clear_grad(head.w);
    return out;
  };
  const auto plain = run(0, 2.5);
  for (int64_t chunk : {int64_t(1), int64_t(4), int64_t(16), kN, int64_t(1000)}) {
    const auto fused = run(chunk, 2.5);
    for (size_t i = 0; i < plain.size(); ++i)
      expect_close(fused[i], plain[i], 1e-5,
                   "chunk " + std::to_string(chunk) + ", result " + std::to_string(i));
  }
}

TEST(ChunkedHead, EveryTargetIgnoredGivesZeroLossAndGradients) {
  Head head;
  Tensor x = random_tensor({6, kC}, 8);
  set_requires_grad(x);
  const Tensor t = Tensor::from_vector(std::vector<double>(6, -100.0), {6}, DType::i64);
  const Tensor loss = chunked_head_cross_entropy(head, x, t, 4);
  EXPECT_EQ(loss.item(), 0.0);
  backward(loss);
  for (double g : to_f64(grad(x))) EXPECT_EQ(g, 0.0);
  for (double g : to_f64(grad(head.w))) EXPECT_EQ(g, 0.0);
}

TEST(ChunkedHead, AHeadParameterHookFiresOnceWithTheFinalGradient) {
  Head head;
  int fired = 0;
  std::vector<double> seen;
  add_grad_hook(head.w, [&](const Tensor& g, const GradHookContext&) {
    ++fired;
    seen = to_f64(g);
  });
  Tensor x = random_tensor({kN, kC}, 8);
  set_requires_grad(x);
  backward(chunked_head_cross_entropy(head, x, targets(kN, 2), 5));
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(seen, to_f64(grad(head.w)));
}

TEST(ChunkedHead, TargetsOutOfRangeNameTheRow) {
  Head head;
  const Tensor x = random_tensor({6, kC}, 8);
  const Tensor t =
      Tensor::from_vector(std::vector<double>{1, 2, 3, 4, double(kV), 5}, {6}, DType::i64);
  try {
    chunked_head_cross_entropy(head, x, t, 4);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 4"), std::string::npos) << e.what();
  }
}

// The unfused path holds the (N, V) logits and their gradient; the fused ones a chunk's: the
// mean cross-entropy, and the per-token log-probabilities (token_logprobs_test.cpp), whose
// backward also holds the chunk's scaled gradient.
TEST(ChunkedHead, PeakFallsToOneChunkOfLogits) {
  constexpr int64_t n = 512, v = 4096, c = 16, chunk = 64;
  const Tensor w = random_tensor({v, c}, 1, DType::f32, -0.1, 0.1);
  set_requires_grad(w);
  const RowFn head = [&](const Tensor& x) { return ag::matmul(x, w, false, true); };
  const Tensor t = Tensor::from_vector(std::vector<double>(size_t(n), 7.0), {n}, DType::i64);
  const Tensor u = random_tensor({n}, 3);  // the per-token log-probabilities' gradient
  CachingAllocator& cpu = allocator_for(Device::cpu());
  auto peak = [&](const std::function<void(const Tensor&)>& forward_backward) {
    Tensor x = random_tensor({n, c}, 2);
    set_requires_grad(x);
    cpu.reset_peak_stats();
    const int64_t base = cpu.stats().allocated_bytes[0].current;
    forward_backward(x);
    clear_grad(w);
    return cpu.stats().allocated_bytes[0].peak - base;
  };
  const int64_t logits = n * v * 4, weight_grad = v * c * 4;
  const int64_t plain = peak([&](const Tensor& x) { backward(ag::cross_entropy(head(x), t)); });
  const int64_t fused =
      peak([&](const Tensor& x) { backward(chunked_head_cross_entropy(head, x, t, chunk)); });
  const int64_t per_token = peak(
      [&](const Tensor& x) { backward({chunked_head_token_logprobs(head, x, t, chunk)}, {u}); });
  EXPECT_GE(plain, logits);
  EXPECT_LT(fused, 2 * chunk * v * 4 + 2 * weight_grad + 64 * 1024) << "plain " << plain;
  EXPECT_LT(per_token, 3 * chunk * v * 4 + 2 * weight_grad + 64 * 1024) << "plain " << plain;
}

}  // namespace
}  // namespace fitgrad::autograd
