// Per-token log-probabilities through the fused, chunked head
// (autograd::chunked_head_token_logprobs, Note [Fused head and per-token log-probabilities]):
// against a float64 log-softmax gathered at the targets written out here, its gradient against
// central finite differences of that float64 reference for every chunk size, the entropy, rows
// with ignored targets, no node under no-grad, and the model's token_logprobs against its
// logits. Its peak memory is checked beside the fused cross-entropy's (row_chunks_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/row_chunks.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "nn/decoder.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::autograd {
namespace {

using fitgrad::testing::all_close;
using fitgrad::testing::finite_diff;
using fitgrad::testing::random_tensor;
using fitgrad::testing::to_f64;
namespace ag = fitgrad::autograd;

constexpr int64_t kN = 13, kC = 5, kV = 17;

// Targets in [0, V) with rows 3 and 9 ignored.
std::vector<int64_t> target_values() {
  std::vector<int64_t> t;
  for (int64_t i = 0; i < kN; ++i) t.push_back(i == 3 || i == 9 ? -100 : (i * 7 + 2) % kV);
  return t;
}

// float64 loops: logits x w^T, log-softmax, each row's log p(target) (0 where ignored), and
// each row's entropy.
struct Reference {
  std::vector<double> logp, entropy;
};
Reference reference(const std::vector<double>& x, const std::vector<double>& w,
                    const std::vector<int64_t>& t) {
  Reference r;
  for (int64_t i = 0; i < kN; ++i) {
    std::vector<double> z(kV);
    double mx = -INFINITY;
    for (int64_t v = 0; v < kV; ++v) {
      double s = 0;
      for (int64_t c = 0; c < kC; ++c) s += x[size_t(i * kC + c)] * w[size_t(v * kC + c)];
      z[size_t(v)] = s;
      mx = std::max(mx, s);
    }
    double sum = 0;
    for (double s : z) sum += std::exp(s - mx);
    const double lse = mx + std::log(sum);
    double h = 0;
    for (double s : z) h -= std::exp(s - lse) * (s - lse);
    const bool ignored = t[size_t(i)] == -100;
    r.logp.push_back(ignored ? 0.0 : z[size_t(t[size_t(i)])] - lse);
    r.entropy.push_back(ignored ? 0.0 : h);
  }
  return r;
}

TEST(TokenLogprobs, ValuesGradientsAndEntropyEqualTheFloat64Reference) {
  const Tensor w = random_tensor({kV, kC}, 21, DType::f32, -1.0, 1.0);  // (V, C)
  set_requires_grad(w);
  const RowFn head = [&](const Tensor& x) { return ag::matmul(x, w, false, true); };
  const std::vector<int64_t> tv = target_values();
  const Tensor t = Tensor::from_vector(tv, {kN}, DType::i64);
  const Tensor u = random_tensor({kN}, 5, DType::f32, -2.0, 2.0);  // the incoming gradient
  const std::vector<double> uv = to_f64(u), wv = to_f64(w);
  const Tensor x0 = random_tensor({kN, kC}, 8, DType::f32, -1.5, 1.5);
  const std::vector<double> xv = to_f64(x0);
  const Reference want = reference(xv, wv, tv);
  // sum_i u_i log p_i in float64, and its derivatives by central differences.
  const auto objective = [&](const std::vector<double>& xs, const std::vector<double>& ws) {
    const Reference r = reference(xs, ws, tv);
    double s = 0;
    for (int64_t i = 0; i < kN; ++i) s += uv[size_t(i)] * r.logp[size_t(i)];
    return s;
  };
  const std::vector<double> dx = finite_diff([&](const auto& v) { return objective(v, wv); }, xv);
  const std::vector<double> dw = finite_diff([&](const auto& v) { return objective(xv, v); }, wv);
  for (int64_t chunk : {int64_t(1), int64_t(4), kN, int64_t(1000)}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    Tensor x = x0.clone();
    set_requires_grad(x);
    Tensor entropy;
    const Tensor logp = chunked_head_token_logprobs(head, x, t, chunk, -100, &entropy);
    EXPECT_TRUE(all_close(to_f64(logp), want.logp, 1e-5, 1e-6));
    EXPECT_TRUE(all_close(to_f64(entropy), want.entropy, 1e-5, 1e-6));
    EXPECT_EQ(to_f64(logp)[3], 0.0);
    backward({logp}, {u});
    EXPECT_TRUE(all_close(to_f64(grad(x)), dx, 1e-4, 1e-5));
    EXPECT_TRUE(all_close(to_f64(grad(w)), dw, 1e-4, 1e-5));
    for (int64_t c = 0; c < kC; ++c) EXPECT_EQ(to_f64(grad(x))[size_t(3 * kC + c)], 0.0);
    clear_grad(w);
  }
}

TEST(TokenLogprobs, WithoutGradModeRecordsNothing) {
  const Tensor w = random_tensor({kV, kC}, 21);
  set_requires_grad(w);
  const RowFn head = [&](const Tensor& x) { return ag::matmul(x, w, false, true); };
  Tensor x = random_tensor({kN, kC}, 8);
  set_requires_grad(x);
  const Tensor t = Tensor::from_vector(target_values(), {kN}, DType::i64);
  const Tensor with = chunked_head_token_logprobs(head, x, t, 4);
  Tensor without;
  {
    NoGradGuard no_grad;
    without = chunked_head_token_logprobs(head, x, t, 4);
  }
  EXPECT_TRUE(requires_grad(with));
  EXPECT_FALSE(requires_grad(without));
  EXPECT_EQ(to_f64(with), to_f64(without));
  // Consumes the tape, which would otherwise keep the node (and x) for a later test's backward.
  backward({with}, {Tensor::full({kN}, 1.0)});
}

TEST(TokenLogprobs, BadTargetsAreNamed) {
  const Tensor w = random_tensor({kV, kC}, 21);
  const RowFn head = [&](const Tensor& x) { return ag::matmul(x, w, false, true); };
  const Tensor x = random_tensor({4, kC}, 8);
  fitgrad::testing::expect_error(
      [&] { chunked_head_token_logprobs(head, x, Tensor::zeros({3}, DType::i64), 2); },
      "[chunked_head_token_logprobs]", "targets must be (4)");
  const Tensor out_of_range =
      Tensor::from_vector(std::vector<int64_t>{1, 2, kV, 3}, {4}, DType::i64);
  EXPECT_THROW(chunked_head_token_logprobs(head, x, out_of_range, 2), Error);
}

// The model's per-token log-probabilities, temperature-scaled, against its own logits.
TEST(TokenLogprobs, TheModelsLogProbabilitiesEqualItsLogitsLogSoftmax) {
  const nn::ModelConfig cfg = nn::preset("llama-tiny");
  const std::unique_ptr<nn::CausalLM> model = nn::build_model(cfg);
  model->set_row_chunking({.head_chunk = 5});
  const Tensor ids = fitgrad::testing::random_ids(2, 7, cfg.vocab_size, 3);  // (B, T)
  std::vector<int64_t> tv = ids.to_vector<int64_t>();
  std::rotate(tv.begin(), tv.begin() + 1, tv.end());
  tv[0] = -100;
  const Tensor targets = Tensor::from_vector(tv, {2, 7}, DType::i64);
  const double temperature = 0.7;
  NoGradGuard no_grad;
  Tensor entropy;
  const Tensor logp = model->token_logprobs(ids, targets, temperature, &entropy);  // (B, T)
  ASSERT_EQ(logp.shape(), Shape({2, 7}));
  ASSERT_EQ(entropy.shape(), Shape({2, 7}));
  const std::vector<double> logits = to_f64(model->forward(ids));  // (B, T, V)
  const int64_t v = cfg.vocab_size;
  std::vector<double> want;
  for (int64_t i = 0; i < 14; ++i) {
    double mx = -INFINITY, sum = 0;
    for (int64_t k = 0; k < v; ++k) mx = std::max(mx, logits[size_t(i * v + k)] / temperature);
    for (int64_t k = 0; k < v; ++k) sum += std::exp(logits[size_t(i * v + k)] / temperature - mx);
    const double lse = mx + std::log(sum);
    want.push_back(
        tv[size_t(i)] == -100 ? 0.0 : logits[size_t(i * v + tv[size_t(i)])] / temperature - lse);
  }
  EXPECT_TRUE(all_close(to_f64(logp), want, 1e-5, 1e-5));
}

}  // namespace
}  // namespace fitgrad::autograd
