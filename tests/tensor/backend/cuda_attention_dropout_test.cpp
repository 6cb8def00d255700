// Dropout inside flash attention on a card (issue 27; Note [Dropout inside flash attention]
// in tensor/ops/attention.h): the cuda kernels' o, lse, dq, dk and dv with dropout against
// the CPU kernels' from the same RngState, over several tiles ((T, S) of (200, 200) and
// (130, 257)), head dims 64 (the tensor-core path in bf16) and 36 (the SIMT path), causal
// and not, GQA with 4 query heads on 2 kv heads and batch 2, bf16 and f32, p 0.1 and 0.5;
// and (77, 93) causal in f32, bf16 and f16, the device check's first step.
// Both sides must draw each probability's factor from its flat index, so a card that drops
// other elements than the CPU fails by far more than the tolerance.
//
// The reference is the CPU's fused dropout, which tests/autograd/attention_dropout_test.cpp
// holds to the composed path's gradients. Here its forward is first held to the composed
// forward written with ops (scores, softmax, ops::dropout on (B, Hkv, G, T, S), times v) at
// the same shapes, so the reference of the card's comparison is checked on every machine;
// the card's comparison skips without a usable GPU.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "tensor/device_registry.h"
#include "tensor/ops/attention.h"
#include "tensor/ops/dropout.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/softmax.h"
#include "tests/card.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::testing {
namespace {

struct Case {
  int64_t t, s, d;
  bool causal;
  DType dtype;
  double p;
};

std::string name(const Case& c) {
  return fmt::format("T{}_S{}_D{}_{}_{}_p{}", c.t, c.s, c.d, c.causal ? "causal" : "full",
                     dtype_name(c.dtype), int(c.p * 10));
}

constexpr int64_t kB = 2, kH = 4, kHkv = 2;
constexpr uint64_t kSeed = 77;

struct Inputs {
  Tensor q, k, v, dout;  // (2, 4, T, D), (2, 2, S, D), (2, 2, S, D), (2, 4, T, D)
};
Inputs make_inputs(const Case& c) {
  const uint64_t seed = uint64_t(c.t * 1000003 + c.s * 1009 + c.d);
  return {random_tensor({kB, kH, c.t, c.d}, seed, c.dtype),
          random_tensor({kB, kHkv, c.s, c.d}, seed + 1, c.dtype),
          random_tensor({kB, kHkv, c.s, c.d}, seed + 2, c.dtype),
          random_tensor({kB, kH, c.t, c.d}, seed + 3, c.dtype)};
}

// o, lse, dq, dk, dv of flash attention with dropout from generator seed kSeed on `device`.
std::vector<Tensor> flash_on(const Inputs& in, const Case& c, Device device) {
  const Tensor q = in.q.to(device), k = in.k.to(device), v = in.v.to(device);
  Generator gen(kSeed);
  const ops::AttentionOut out = ops::flash_attention(q, k, v, c.causal, 0, c.p, gen);
  const ops::AttentionGrads g = ops::flash_attention_backward(
      in.dout.to(device), q, k, v, out.o, out.lse, c.causal, 0, c.p, out.dropout_state);
  std::vector<Tensor> all;
  for (const Tensor& t : {out.o, out.lse, g.dq, g.dk, g.dv}) all.push_back(t.to(Device::cpu()));
  return all;
}

// The composed forward in f32 on the CPU, drawing from generator seed kSeed.
Tensor composed_forward(const Inputs& in, const Case& c) {
  const int64_t g = kH / kHkv;
  const Tensor q5 = in.q.to(DType::f32).reshape({kB, kHkv, g, c.t, c.d});
  const Tensor k5 = in.k.to(DType::f32).reshape({kB, kHkv, 1, c.s, c.d});
  const Tensor v5 = in.v.to(DType::f32).reshape({kB, kHkv, 1, c.s, c.d});
  const Tensor scores = ops::scale(ops::matmul(q5, k5, false, true), 1.0 / std::sqrt(double(c.d)));
  const Tensor probs = c.causal ? ops::causal_softmax(scores) : ops::softmax(scores, -1);
  Generator gen(kSeed);
  return ops::matmul(ops::dropout(probs, c.p, gen).y, v5).reshape({kB, kH, c.t, c.d});
}

const char* const kOutputs[] = {"o", "lse", "dq", "dk", "dv"};

// As Note [Multi-tile attention tolerances] (cuda_attention_tiles_test.cpp): the forward at
// the dtype's tolerance, the gradients and bf16's lse at 4 times it; with dropout the
// gradients sum terms scaled by up to 1 / (1 - p) = 2, hence 8 times for p = 0.5.
double slack(const Case& c, size_t output) {
  const double drop = c.p > 0.25 ? 2.0 : 1.0;
  if (c.dtype == DType::f32) return output >= 2 ? 4.0 * drop : 1.0;
  return output == 0 ? 1.0 : 4.0 * drop;
}
DType bound_dtype(const Case& c, size_t output) {
  return output == 1 && c.dtype != DType::f32 ? DType::bf16 : c.dtype;
}

class AttentionDropoutTiles : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionDropoutTiles, CpuFusedForwardMatchesTheComposedOps) {
  const Case c = GetParam();
  const Inputs in = make_inputs(c);
  const std::vector<Tensor> flash = flash_on(in, c, Device::cpu());
  // bf16 inputs are widened exactly; the fused o is rounded once to bf16.
  EXPECT_TRUE(close_for(c.dtype, to_f64(flash[0]), to_f64(composed_forward(in, c)), 1.0));
}

TEST_P(AttentionDropoutTiles, CudaMatchesTheCpu) {
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
  for (auto [t, s] : {std::pair<int64_t, int64_t>{200, 200}, {130, 257}})
    for (int64_t d : {64, 36})
      for (bool causal : {false, true})
        for (DType dtype : {DType::bf16, DType::f32})
          for (double p : {0.1, 0.5}) all.push_back({t, s, d, causal, dtype, p});
  // The device check's first step (issue 46): one tile edge apart in T and S, causal with
  // grouped-query heads, in every dtype the kernels take.
  for (DType dtype : {DType::f32, DType::bf16, DType::f16})
    all.push_back({77, 93, 64, true, dtype, 0.1});
  return all;
}

INSTANTIATE_TEST_SUITE_P(CudaDropout, AttentionDropoutTiles, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return name(info.param);
                         });

}  // namespace
}  // namespace fitgrad::testing
