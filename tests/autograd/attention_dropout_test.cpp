// Dropout inside flash attention (Note [Dropout inside flash attention] in
// tensor/ops/attention.h) against the composed path it replaces: softmax, ops::dropout on
// the (B, Hkv, G, T, S) probabilities and a matmul with v, through autograd. One table row
// per shape (T not a multiple of the 64-row tile, causal and not, T < S, grouped and
// multi-query heads, p 0.1 and 0.5): the same output and the same dq, dk and dv to f32
// rounding, and the generator advanced by the same B Hq T S draws. With v the identity the
// output is the dropped probabilities themselves, whose zeros must be exactly ops::dropout's.
// p = 0 is plain flash attention; the result does not depend on the thread count.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "tensor/ops/attention.h"
#include "tensor/ops/dropout.h"
#include "tests/tensor/ops/op_harness.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace fitgrad::autograd {
namespace {

using fitgrad::testing::all_close;
using fitgrad::testing::max_abs;
using fitgrad::testing::random_tensor;
using fitgrad::testing::to_f64;
namespace ag = fitgrad::autograd;

struct Case {
  int64_t b, hq, hkv, t, s, d;
  bool causal;
  double p;
};

// The composed reference: scores (B, Hkv, G, T, S), softmax (causal: bottom-right aligned,
// Note [Causal softmax]), dropout from `gen`, times v; grouped kv heads broadcast.
Tensor composed(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double p,
                Generator& gen) {
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2), d = q.size(3);
  const int64_t hkv = k.size(1), s = k.size(2), g = h / hkv;
  const Tensor q5 = ag::reshape(ag::contiguous(q), {b, hkv, g, t, d});
  const Tensor k5 = ag::reshape(ag::contiguous(k), {b, hkv, 1, s, d});
  const Tensor v5 = ag::reshape(ag::contiguous(v), {b, hkv, 1, s, d});
  const Tensor scores = ag::scale(ag::matmul(q5, k5, false, true), 1.0 / std::sqrt(double(d)));
  const Tensor probs = ag::dropout(ag::softmax(scores, -1, causal), p, gen);  // (B,Hkv,G,T,S)
  return ag::reshape(ag::matmul(probs, v5), {b, h, t, d});
}

struct Result {
  std::vector<double> o, dq, dk, dv;
  RngState after;
};

// o and the gradients of sum(o * w) through `fused` or the composed path, from seed 19.
Result run(const Case& c, bool fused) {
  const Tensor q = random_tensor({c.b, c.hq, c.t, c.d}, 1, DType::f32, -2, 2);
  const Tensor k = random_tensor({c.b, c.hkv, c.s, c.d}, 2, DType::f32, -2, 2);
  const Tensor v = random_tensor({c.b, c.hkv, c.s, c.d}, 3);
  const Tensor w = random_tensor({c.b, c.hq, c.t, c.d}, 4);
  for (const Tensor* x : {&q, &k, &v}) set_requires_grad(*x);
  Generator gen(19);
  const Tensor o =
      fused ? ag::attention(q, k, v, c.causal, 0, c.p, gen) : composed(q, k, v, c.causal, c.p, gen);
  backward(ag::sum(ag::mul(o, w)));
  return {to_f64(o), to_f64(grad(q)), to_f64(grad(k)), to_f64(grad(v)), gen.state()};
}

class AttentionDropoutTable : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionDropoutTable, FusedEqualsComposed) {
  const Case c = GetParam();
  const Result fused = run(c, true), ref = run(c, false);
  // f32 through different summation orders: o to 2e-5 of its largest value, the gradients
  // to 1e-4 of theirs (each sums T or S products of probabilities and dropout scales).
  EXPECT_TRUE(all_close(fused.o, ref.o, 1e-4, 2e-5 * max_abs(ref.o)));
  EXPECT_TRUE(all_close(fused.dq, ref.dq, 1e-4, 1e-4 * max_abs(ref.dq)));
  EXPECT_TRUE(all_close(fused.dk, ref.dk, 1e-4, 1e-4 * max_abs(ref.dk)));
  EXPECT_TRUE(all_close(fused.dv, ref.dv, 1e-4, 1e-4 * max_abs(ref.dv)));
  EXPECT_EQ(fused.after, ref.after);
  EXPECT_EQ(fused.after.offset, uint64_t(c.b * c.hq * c.t * c.s));  // from offset 0
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionDropoutTable,
    ::testing::Values(Case{2, 4, 4, 70, 70, 16, true, 0.1},    // T past one 64-row tile
                      Case{1, 4, 2, 130, 130, 8, true, 0.5},   // GQA, three tiles
                      Case{2, 2, 2, 65, 65, 16, false, 0.1},   // not causal
                      Case{1, 4, 1, 37, 100, 16, false, 0.5},  // multi-query, T < S
                      Case{1, 2, 2, 50, 129, 8, true, 0.1},    // causal, T < S
                      Case{1, 3, 3, 64, 64, 32, true, 0.5}));  // exactly one tile

// v = I (S = D): o is the dropped probabilities, (B, Hq, T, S). Its zeros are exactly where
// ops::dropout, run on the composed path's (B, Hkv, G, T, S) shape from the same state,
// drops, over every visible key; invisible keys are 0 either way.
TEST(AttentionDropout, DropsExactlyTheElementsOpsDropoutDrops) {
  const int64_t B = 2, H = 4, HKV = 2, T = 24, S = 32;
  for (const double p : {0.1, 0.5}) {
    SCOPED_TRACE(p);
    const Tensor q = random_tensor({B, H, T, S}, 5, DType::f32, -0.5, 0.5);
    const Tensor k = random_tensor({B, HKV, S, S}, 6, DType::f32, -0.5, 0.5);
    std::vector<float> eye(size_t(B * HKV * S * S), 0.0f);
    for (int64_t m = 0; m < B * HKV; ++m)
      for (int64_t j = 0; j < S; ++j) eye[size_t((m * S + j) * S + j)] = 1.0f;
    const Tensor v = Tensor::from_vector(eye, {B, HKV, S, S});
    Generator gen(23);
    const ops::AttentionOut out = ops::flash_attention(q, k, v, /*causal=*/true, 0, p, gen);
    Generator replay(23);
    const std::vector<double> kept =
        to_f64(ops::dropout(Tensor::full({B, HKV, H / HKV, T, S}, 1.0), p, replay).y);
    EXPECT_EQ(gen.state(), replay.state());
    const std::vector<double> z = to_f64(out.o);
    int64_t dropped = 0, mismatched = 0;
    for (int64_t row = 0; row < B * H * T; ++row)
      for (int64_t j = 0; j <= row % T + S - T; ++j) {
        const size_t i = size_t(row * S + j);
        if (kept[i] == 0) ++dropped;
        if ((z[i] == 0) != (kept[i] == 0)) ++mismatched;
      }
    EXPECT_EQ(mismatched, 0);
    EXPECT_GT(dropped, 0);
  }
}

TEST(AttentionDropout, ZeroPIsPlainFlashAttentionAndDrawsNothing) {
  const Tensor q = random_tensor({1, 2, 40, 8}, 7), k = random_tensor({1, 2, 40, 8}, 8),
               v = random_tensor({1, 2, 40, 8}, 9);
  Generator gen(3);
  const ops::AttentionOut with = ops::flash_attention(q, k, v, true, 0, 0.0, gen);
  EXPECT_EQ(gen.state(), (RngState{3, 0}));
  EXPECT_EQ(to_f64(with.o), to_f64(ops::flash_attention(q, k, v, true).o));
  const Tensor dout = random_tensor({1, 2, 40, 8}, 10);
  Generator drawing(3);
  const ops::AttentionOut dropped = ops::flash_attention(q, k, v, true, 0, 0.3, drawing);
  EXPECT_NE(to_f64(dropped.o), to_f64(with.o));
  EXPECT_EQ(to_f64(dropped.lse), to_f64(with.lse));  // lse is of the undropped probabilities
}

TEST(AttentionDropout, RejectsPOutsideZeroToOne) {
  const Tensor q = random_tensor({1, 1, 4, 4}, 1);
  for (const double p : {1.0, -0.1})
    EXPECT_NE(fitgrad::testing::error_of([&] {
                ops::flash_attention(q, q, q, true, 0, p);
              }).find("[flash_attention] dropout p"),
              std::string::npos)
        << p;
}

TEST(AttentionDropout, BackwardIsIndependentOfTheThreadCount) {
#ifndef _OPENMP
  GTEST_SKIP() << "built without OpenMP";
#else
  const Case c{1, 4, 2, 100, 100, 16, true, 0.5};
  const Result first = run(c, true);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const Result single = run(c, true);
  omp_set_num_threads(saved);
  EXPECT_EQ(single.o, first.o);
  EXPECT_EQ(single.dq, first.dq);
  EXPECT_EQ(single.dk, first.dk);
  EXPECT_EQ(single.dv, first.dv);
#endif
}

}  // namespace
}  // namespace fitgrad::autograd
