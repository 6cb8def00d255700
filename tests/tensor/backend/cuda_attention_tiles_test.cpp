// Flash attention across several tiles (issue 26, item 3). The op harness
// (backend_ops_test.cpp) compares attention at T = 6 and GPT-2's training tests at T = 32,
// each one tile, so these cases run multi-tile work on a card for the first time: (T, S) of
// (200, 200), (130, 257) and (257, 130), so that the last query and key tiles are partial and
// the causal diagonal crosses tile edges off the corner; head dims 64 and 128 (tensor-core
// tiles of their own size), 80 (padded to the 128 tile) and 36 (the SIMT path: not a
// multiple of 8); causal and not, and causal sliding windows of 2, 50 and 100 keys (Note
// [Sliding-window attention]: narrower than a tile, off the tile grid, across two), and scores
// soft-capped at 1 (Gemma 2), causal and in a window of 50, and at head dims 96, 128 and 256
// (issue 57); GQA with 4
// query heads on 2 kv heads and batch 2; bf16 and f32; the forward's o and lse and the
// backward's dq, dk and dv.
//
// The reference is the CPU's flash attention, which tests/tensor/ops/attention_test.cpp
// holds to an fp64 reference and finite differences. Here it is first held to the CPU's
// naive attention at the same shapes, so that the reference of the card's comparison is
// checked on every machine, card or not; the card's comparison skips without a usable GPU.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tensor/device_registry.h"
#include "tensor/ops/attention.h"
#include "tests/card.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::testing {
namespace {

struct Case {
  int64_t t, s, d;
  bool causal;
  DType dtype;
  int64_t window = 0;  // > 0: causal within this sliding window
  double softcap = 0;  // > 0: scores soft-capped (Gemma 2)

  backend::AttentionMask mask() const {
    backend::AttentionMask m =
        window > 0 ? backend::AttentionMask::sliding(window) : backend::AttentionMask(causal);
    m.softcap = softcap;
    return m;
  }
};

std::string name(const Case& c) {
  return fmt::format("T{}_S{}_D{}_{}{}_{}", c.t, c.s, c.d,
                     c.window > 0 ? fmt::format("window{}", c.window)
                     : c.causal   ? "causal"
                                  : "full",
                     c.softcap > 0 ? "_softcap" : "", dtype_name(c.dtype));
}

// The inputs on the CPU: q, k, v and dout, seeded by the case.
struct Inputs {
  Tensor q, k, v, dout;  // (2, 4, T, D), (2, 2, S, D), (2, 2, S, D), (2, 4, T, D)
};
Inputs make_inputs(const Case& c) {
  const uint64_t seed = uint64_t(c.t * 1000003 + c.s * 1009 + c.d);
  return {random_tensor({2, 4, c.t, c.d}, seed, c.dtype),
          random_tensor({2, 2, c.s, c.d}, seed + 1, c.dtype),
          random_tensor({2, 2, c.s, c.d}, seed + 2, c.dtype),
          random_tensor({2, 4, c.t, c.d}, seed + 3, c.dtype)};
}

// o, lse, dq, dk, dv of flash attention on `device`, read back to the CPU.
std::vector<Tensor> flash_on(const Inputs& in, const Case& c, Device device) {
  const Tensor q = in.q.to(device), k = in.k.to(device), v = in.v.to(device);
  const ops::AttentionOut out = ops::flash_attention(q, k, v, c.mask());
  const ops::AttentionGrads g =
      ops::flash_attention_backward(in.dout.to(device), q, k, v, out.o, out.lse, c.mask());
  std::vector<Tensor> all;
  for (const Tensor& t : {out.o, out.lse, g.dq, g.dk, g.dv}) all.push_back(t.to(Device::cpu()));
  return all;
}

const char* const kOutputs[] = {"o", "lse", "dq", "dk", "dv"};

// Note [Multi-tile attention tolerances]
// The forward is held to the dtype's tolerance (op_harness.h). The gradients sum S (dq) or
// G T (dk, dv) products whose terms were rounded to the dtype on the way (the probabilities
// of a bf16 tensor-core tile are bf16 before the products with v and dout, where the CPU
// keeps them f32), so they get 4 times the bound; lse is f32 in every case and held to f32's
// bound scaled by the same 4 for bf16 inputs, whose scores differ in rounding.
double slack(const Case& c, size_t output) {
  if (c.dtype == DType::f32) return output >= 2 ? 4.0 : 1.0;
  return output == 0 ? 1.0 : 4.0;
}
DType bound_dtype(const Case& c, size_t output) {
  return output == 1 && c.dtype != DType::f32 ? DType::bf16 : c.dtype;
}

class AttentionTiles : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionTiles, CpuFlashMatchesTheNaiveReference) {
  const Case c = GetParam();
  if (c.softcap > 0)
    GTEST_SKIP() << "naive attention has no soft cap; the CPU flash's is held to an fp64 "
                    "reference and finite differences in tests/tensor/ops/attention_test.cpp";
  const Inputs in = make_inputs(c);
  const std::vector<Tensor> flash = flash_on(in, c, Device::cpu());
  const Tensor naive = ops::naive_attention(in.q, in.k, in.v, c.mask());
  const ops::AttentionGrads g = ops::naive_attention_backward(in.dout, in.q, in.k, in.v, c.mask());
  const Tensor want[] = {naive, g.dq, g.dk, g.dv};
  const size_t index[] = {0, 2, 3, 4};
  for (size_t i = 0; i < 4; ++i)
    EXPECT_TRUE(close_for(c.dtype, to_f64(flash[index[i]]), to_f64(want[i]), slack(c, index[i])))
        << kOutputs[index[i]];
}

TEST_P(AttentionTiles, CudaMatchesTheCpu) {
  FG_SKIP_WITHOUT_CARD();
  const Case c = GetParam();
  const Inputs in = make_inputs(c);
  const std::vector<Tensor> want = flash_on(in, c, Device::cpu());
  const std::vector<Tensor> got = flash_on(in, c, Device::cuda(0));
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].shape(), want[i].shape()) << kOutputs[i];
    EXPECT_TRUE(close_for(bound_dtype(c, i), to_f64(got[i]), to_f64(want[i]), slack(c, i)))
        << kOutputs[i];
  }
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (auto [t, s] : {std::pair<int64_t, int64_t>{200, 200}, {130, 257}, {257, 130}})
    for (int64_t d : {64, 80, 128, 36})
      for (bool causal : {false, true})
        for (DType dtype : {DType::bf16, DType::f32}) all.push_back({t, s, d, causal, dtype});
  for (auto [t, s] : {std::pair<int64_t, int64_t>{200, 200}, {130, 257}})
    for (int64_t d : {64, 36})
      for (int64_t window : {2, 50, 100})
        for (DType dtype : {DType::bf16, DType::f32}) all.push_back({t, s, d, true, dtype, window});
  // Soft caps of 1 on scores of about unit size: tanh bends most of them.
  for (int64_t d : {64, 36})
    for (int64_t window : {0, 50})
      for (DType dtype : {DType::bf16, DType::f32})
        all.push_back({130, 257, d, true, dtype, window, 1.0});
  // Issue 57: the soft cap at Phi-3's head dim 96 (padded to the 128 tile), at 128 (other
  // tile sizes than 64's) and at Gemma 2/3's 256 (the SIMT path, with 140 KB of shared
  // memory).
  for (int64_t d : {96, 128, 256})
    for (DType dtype : {DType::bf16, DType::f32}) all.push_back({130, 257, d, true, dtype, 0, 1.0});
  return all;
}

INSTANTIATE_TEST_SUITE_P(CudaMultiTile, AttentionTiles, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return name(info.param);
                         });

}  // namespace
}  // namespace fitgrad::testing
