// Packed rows through a whole model (nn/packed_rows.h): a batch whose rows pack several
// examples gives the loss and every parameter's gradient that the examples give run one by
// one, each weighted by its share of the batch's targets (the loss is the mean over all of
// them), for GPT-2 (learned positions, gathered per example) and Llama (RoPE at each
// example's positions, grouped-query attention, a sliding window), with the fused head and
// checkpointed blocks too. f32; tolerance 2e-5 relative, 1e-6 of the largest gradient
// absolute: the packed and the lone runs sum in different groupings.
#include <gtest/gtest.h>

#include <map>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "nn/decoder.h"
#include "tests/tensor/ops/op_harness.h"
#include "tests/tensor/packed_rows_fixture.h"

namespace fitgrad::nn {
namespace {

namespace ag = fitgrad::autograd;
using Rows = testing::PackedLengths;

PackedRows packed_rows_of(const Rows& rows, int64_t t) {
  const auto b = int64_t(rows.size());
  int64_t longest = 0;
  for (const auto& row : rows)
    for (const int32_t n : row) longest = std::max<int64_t>(longest, n);
  return {Tensor::from_vector(testing::example_bounds(rows, t), {2, b, t}, DType::i32),
          {Tensor::from_vector(testing::example_positions(rows), {b, t}, DType::i32), longest}};
}

using Grads = std::map<std::string, std::vector<double>>;

Grads grads_of(const CausalLM& m) {
  Grads g;
  for (const auto& [name, p] : m.named_parameters()) g[name] = ag::grad(p).to_vector<double>();
  return g;
}

void expect_packed_equals_alone(const CausalLM& m, const Rows& rows, int64_t t) {
  const auto b = int64_t(rows.size());
  const Tensor ids = testing::random_ids(b, t, m.config().vocab_size, 11);
  Tensor targets = testing::random_ids(b, t, m.config().vocab_size, 12).to(DType::i64);
  // Some targets ignored, as a prompt's are, and each example's last (the next one's first).
  std::vector<int64_t> tv = targets.to_vector<int64_t>();
  for (size_t i = 0; i < tv.size(); i += 3) tv[i] = -100;
  for (int64_t r = 0, at = 0; r < b; ++r, at = 0)
    for (const int32_t n : rows[size_t(r)]) tv[size_t(r * t + (at += n) - 1)] = -100;
  targets = Tensor::from_vector(tv, {b, t}, DType::i64);
  const auto counted = [](const Tensor& x) {
    const std::vector<int64_t> v = x.to_vector<int64_t>();
    return double(std::count_if(v.begin(), v.end(), [](int64_t y) { return y != -100; }));
  };
  const double all = counted(targets);

  const PackedRows packed = packed_rows_of(rows, t);
  m.zero_grad();
  const Tensor loss = m.loss(ids, targets, &packed);
  ag::backward(loss);
  const Grads want_packed = grads_of(m);

  m.zero_grad();
  double alone = 0;
  for (int64_t r = 0; r < b; ++r) {
    int64_t at = 0;
    for (const int32_t n : rows[size_t(r)]) {
      const Tensor ie = ids.narrow(0, r, 1).narrow(1, at, n).contiguous();
      const Tensor te = targets.narrow(0, r, 1).narrow(1, at, n).contiguous();
      at += n;
      const double share = counted(te) / all;
      if (share == 0) continue;
      const Tensor le = m.loss(ie, te);
      alone += le.item() * share;
      ag::backward(ag::scale(le, share));
    }
  }
  EXPECT_NEAR(loss.item(), alone, 2e-5 * alone);
  const Grads got_alone = grads_of(m);
  for (const auto& [name, g] : want_packed)
    EXPECT_TRUE(testing::all_close(got_alone.at(name), g, 2e-5, 1e-6 * testing::max_abs(g)))
        << name;
}

const Rows kRows = {{7, 1, 10, 6}, {24}, {12, 12}};

TEST(PackedModel, LossAndGradientsEqualEachExampleAlone) {
  ModelConfig windowed = preset("llama-tiny");
  windowed.sliding_window = 5;
  for (const ModelConfig& cfg : {preset("gpt2-tiny"), preset("llama-tiny"), windowed}) {
    SCOPED_TRACE(cfg.name + (cfg.sliding_window > 0 ? " windowed" : ""));
    const auto m = build_model(cfg, {.seed = 3});
    expect_packed_equals_alone(*m, kRows, 24);
  }
}

TEST(PackedModel, FusedHeadAndCheckpointedBlocksToo) {
  const auto m = build_model(preset("llama-tiny"), {.seed = 4});
  m->set_checkpointing(autograd::SegmentPlan::count(m->num_layers()));
  m->set_row_chunking({.fused_head_loss = true, .head_chunk = 16});
  expect_packed_equals_alone(*m, kRows, 24);
}

}  // namespace
}  // namespace fitgrad::nn
