// Attention over packed rows (Note [Packed rows] in tensor/backend/attention_mask.h): each
// example of a packed row, forward (o, lse) and backward (dq, dk, dv), equals that example
// run alone under the plain causal mask, for flash and naive attention, grouped-query heads,
// a sliding window, Gemma's soft cap, f32 and bf16, and rows whose examples straddle the
// kernels' 64-position tiles. The tolerance is the dtype's (Note [Op test tolerances]) times
// 4: the packed and the lone call sum their tiles' terms in different groupings. With dropout,
// where a lone run would draw other elements, no example's outputs or gradients change when
// the other examples' inputs do. On a card (the device check's CudaPacked) the cuda kernels,
// both paths, with and without dropout, match the CPU's packed results, as do soft-capped
// packed rows at head dims 96, 128 and 256 and one packed case with a window and a cap.
#include <gtest/gtest.h>

#include <vector>

#include "tensor/device_registry.h"
#include "tensor/ops/attention.h"
#include "tests/card.h"
#include "tests/tensor/ops/op_harness.h"
#include "tests/tensor/packed_rows_fixture.h"

namespace fitgrad::testing {
namespace {

using Rows = PackedLengths;

// (2, B, T) i32: each position's example [begin, end).
Tensor segments_of(const Rows& rows, int64_t t) {
  return Tensor::from_vector(example_bounds(rows, t), {2, int64_t(rows.size()), t}, DType::i32);
}

// Positions [at, at + n) of row b of x (B, H, T, D), as a contiguous (1, H, n, D).
Tensor piece(const Tensor& x, int64_t b, int64_t at, int64_t n) {
  return x.narrow(0, b, 1).narrow(2, at, n).contiguous();
}

struct Case {
  int64_t hq, hkv, d;
  Rows rows;
  backend::AttentionMask mask;
  DType dtype;
  bool naive;
};

void expect_packed_equals_alone(const Case& c) {
  const auto b = int64_t(c.rows.size());
  int64_t t = 0;
  for (const int32_t n : c.rows[0]) t += n;
  const Tensor q = random_tensor({b, c.hq, t, c.d}, 1, c.dtype, -2, 2);
  const Tensor k = random_tensor({b, c.hkv, t, c.d}, 2, c.dtype, -2, 2);
  const Tensor v = random_tensor({b, c.hkv, t, c.d}, 3, c.dtype);
  const Tensor dout = random_tensor({b, c.hq, t, c.d}, 4, c.dtype);
  const Tensor segments = segments_of(c.rows, t);
  const backend::AttentionMask packed = ops::packed_rows_mask(c.mask, segments);
  Tensor o, lse;
  ops::AttentionGrads g;
  if (c.naive) {
    o = ops::naive_attention(q, k, v, packed);
    g = ops::naive_attention_backward(dout, q, k, v, packed);
  } else {
    ops::AttentionOut out = ops::flash_attention(q, k, v, packed);
    o = out.o;
    lse = out.lse;
    g = ops::flash_attention_backward(dout, q, k, v, o, lse, packed);
  }
  for (int64_t row = 0; row < b; ++row) {
    int64_t at = 0;
    for (const int32_t n : c.rows[size_t(row)]) {
      const Tensor qe = piece(q, row, at, n), ke = piece(k, row, at, n), ve = piece(v, row, at, n);
      const Tensor de = piece(dout, row, at, n);
      Tensor oe;
      ops::AttentionGrads ge;
      const std::string where = "row " + std::to_string(row) + " at " + std::to_string(at);
      if (c.naive) {
        oe = ops::naive_attention(qe, ke, ve, c.mask);
        ge = ops::naive_attention_backward(de, qe, ke, ve, c.mask);
      } else {
        const ops::AttentionOut out = ops::flash_attention(qe, ke, ve, c.mask);
        oe = out.o;
        ge = ops::flash_attention_backward(de, qe, ke, ve, oe, out.lse, c.mask);
        EXPECT_TRUE(all_close(to_f64(lse.narrow(0, row, 1).narrow(2, at, n).contiguous()),
                              to_f64(out.lse), 1e-5, 1e-5))
            << where;
      }
      EXPECT_TRUE(close_for(c.dtype, to_f64(piece(o, row, at, n)), to_f64(oe), 4)) << where;
      EXPECT_TRUE(close_for(c.dtype, to_f64(piece(g.dq, row, at, n)), to_f64(ge.dq), 4)) << where;
      EXPECT_TRUE(close_for(c.dtype, to_f64(piece(g.dk, row, at, n)), to_f64(ge.dk), 4)) << where;
      EXPECT_TRUE(close_for(c.dtype, to_f64(piece(g.dv, row, at, n)), to_f64(ge.dv), 4)) << where;
      at += n;
    }
  }
}

backend::AttentionMask capped(backend::AttentionMask mask, double cap) {
  mask.softcap = cap;
  return mask;
}

TEST(AttentionPacked, EachExampleEqualsItsLoneRun) {
  const Rows straddling = {{30, 1, 69, 100}, {200}, {64, 64, 72}};
  const Rows small = {{5, 12, 3}, {1, 19}};
  const backend::AttentionMask causal(true);
  const backend::AttentionMask window = backend::AttentionMask::sliding(20);
  const std::vector<Case> cases = {
      {4, 2, 16, straddling, causal, DType::f32, false},
      {4, 4, 8, straddling, window, DType::f32, false},
      {4, 1, 16, straddling, capped(causal, 5.0), DType::f32, false},
      {2, 2, 64, straddling, causal, DType::bf16, false},  // the AMX tiles where the CPU has them
      {4, 2, 16, straddling, window, DType::bf16, false},
      {4, 2, 16, small, causal, DType::f32, true},
      {2, 1, 8, small, window, DType::bf16, true},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    expect_packed_equals_alone(cases[i]);
  }
}

TEST(AttentionPacked, WithDropoutNoExampleSeesAnother) {
  // Row 0 packs examples [0, 40), [40, 130), [130, 150): changing the inputs of the first and
  // the last leaves the middle one's outputs and gradients as they were, bit for bit.
  const int64_t b = 1, h = 2, t = 150, d = 16;
  const Tensor segments = segments_of({{40, 90, 20}}, t);
  const backend::AttentionMask mask = ops::packed_rows_mask(true, segments);
  const auto run = [&](uint64_t other_seed) {
    Tensor q = random_tensor({b, h, t, d}, 1, DType::f32, -2, 2);
    Tensor k = random_tensor({b, h, t, d}, 2, DType::f32, -2, 2);
    Tensor v = random_tensor({b, h, t, d}, 3, DType::f32);
    Tensor dout = random_tensor({b, h, t, d}, 4, DType::f32);
    for (Tensor* x : {&q, &k, &v, &dout})
      for (const auto& [at, n] : {std::pair<int64_t, int64_t>{0, 40}, {130, 20}})
        x->narrow(2, at, n).copy_(random_tensor({b, h, n, d}, other_seed++, DType::f32));
    Generator gen(7);
    const ops::AttentionOut out = ops::flash_attention(q, k, v, mask, 0, 0.3, gen);
    const ops::AttentionGrads g = ops::flash_attention_backward(dout, q, k, v, out.o, out.lse, mask,
                                                                0, 0.3, out.dropout_state);
    std::vector<std::vector<double>> middle;
    for (const Tensor& x : {out.o, g.dq, g.dk, g.dv}) middle.push_back(to_f64(piece(x, 0, 40, 90)));
    return middle;
  };
  const auto first = run(100), second = run(200);
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(first[i], second[i]) << i;
  // and the dropout drops some of the middle example's probabilities
  const Tensor ones = Tensor::full({b, h, t, d}, 1.0);
  Generator gen(7);
  const Tensor q = random_tensor({b, h, t, d}, 1, DType::f32, -2, 2);
  const Tensor with = ops::flash_attention(q, q, ones, mask, 0, 0.3, gen).o;
  EXPECT_NE(to_f64(piece(with, 0, 40, 90)), to_f64(piece(ones, 0, 40, 90)));
}

TEST(AttentionPacked, RefusesWhatPackedRowsAreNot) {
  const Tensor q = random_tensor({1, 2, 8, 4}, 1);
  const Tensor segments = segments_of({{3, 5}}, 8);
  expect_error([&] { ops::packed_rows_mask(false, segments); }, "[attention]", "causal");
  expect_error(
      [&] {
        ops::packed_rows_mask(true, Tensor::zeros({2, 1, 8}));
      },
      "[attention]", "(2, B, T) i32");
  const Tensor kv = random_tensor({1, 2, 10, 4}, 2);
  expect_error([&] { ops::flash_attention(q, kv, kv, ops::packed_rows_mask(true, segments)); },
               "[flash_attention]", "self-attention");
}

// o, lse, dq, dk, dv of packed flash attention on `device` (inputs made on the CPU), causal
// within each example, or in a sliding `window` (> 0), scores soft-capped at `softcap` (> 0).
std::vector<Tensor> packed_flash_on(Device device, int64_t d, DType dtype, double dropout,
                                    int64_t window = 0, double softcap = 0) {
  const Rows rows = {{30, 1, 69, 100}, {200}, {64, 64, 72}};
  const Tensor q = random_tensor({3, 4, 200, d}, 1, dtype, -2, 2).to(device);
  const Tensor k = random_tensor({3, 2, 200, d}, 2, dtype, -2, 2).to(device);
  const Tensor v = random_tensor({3, 2, 200, d}, 3, dtype).to(device);
  const Tensor dout = random_tensor({3, 4, 200, d}, 4, dtype).to(device);
  const Tensor segments = segments_of(rows, 200).to(device);
  backend::AttentionMask base =
      window > 0 ? backend::AttentionMask::sliding(window) : backend::AttentionMask(true);
  base.softcap = softcap;
  const backend::AttentionMask mask = ops::packed_rows_mask(base, segments);
  Generator gen(5);
  const ops::AttentionOut out = ops::flash_attention(q, k, v, mask, 0, dropout, gen);
  const ops::AttentionGrads g = ops::flash_attention_backward(dout, q, k, v, out.o, out.lse, mask,
                                                              0, dropout, out.dropout_state);
  std::vector<Tensor> all;
  for (const Tensor& t : {out.o, out.lse, g.dq, g.dk, g.dv}) all.push_back(t.to(Device::cpu()));
  return all;
}

TEST(CudaPacked, TheCardMatchesTheCpu) {
  FG_SKIP_WITHOUT_CARD();
  // d 64 in bf16 takes the tensor-core path, 36 and f32 the SIMT one; the tolerance is that of
  // the multi-tile cases (Note [Multi-tile attention tolerances] in cuda_attention_tiles_test).
  for (const auto& [d, dtype] :
       {std::pair<int64_t, DType>{64, DType::bf16}, {36, DType::bf16}, {64, DType::f32}})
    for (const double dropout : {0.0, 0.2}) {
      SCOPED_TRACE(std::to_string(d) + " " + std::string(dtype_name(dtype)) + " " +
                   std::to_string(dropout));
      const std::vector<Tensor> want = packed_flash_on(Device::cpu(), d, dtype, dropout);
      const std::vector<Tensor> got = packed_flash_on(Device::cuda(0), d, dtype, dropout);
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_TRUE(close_for(i == 1 && dtype != DType::f32 ? DType::bf16 : dtype, to_f64(got[i]),
                              to_f64(want[i]), i == 0 && dtype != DType::f32 ? 1.0 : 4.0))
            << i;
    }
}

// Issue 57: packed rows at the head dims whose tiles differ from 64's (96 padded to 128, 128,
// and 256 on the SIMT path), soft-capped at 1, and at 64 in a window of 50 with the cap.
TEST(CudaPacked, WideHeadsWindowsAndCapsMatchTheCpu) {
  FG_SKIP_WITHOUT_CARD();
  struct Wide {
    int64_t d;
    int64_t window;
  };
  for (const auto& [d, window] : {Wide{96, 0}, Wide{128, 0}, Wide{256, 0}, Wide{64, 50}}) {
    SCOPED_TRACE("d " + std::to_string(d) + " window " + std::to_string(window));
    const std::vector<Tensor> want =
        packed_flash_on(Device::cpu(), d, DType::bf16, 0.0, window, 1.0);
    const std::vector<Tensor> got =
        packed_flash_on(Device::cuda(0), d, DType::bf16, 0.0, window, 1.0);
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_TRUE(close_for(DType::bf16, to_f64(got[i]), to_f64(want[i]), i == 0 ? 1.0 : 4.0)) << i;
  }
}

}  // namespace
}  // namespace fitgrad::testing
