// The preference losses (train/preference_loss.h) against PyTorch float64 on the published
// formulas (tests/golden/preference, gen_preference_golden.py): DPO's sigmoid (with label
// smoothing), hinge and IPO losses and ORPO, their gradients with respect to the answers' NLLs
// and the logged statistics; the same through autograd; and autograd::sequence_nll, each
// sequence's summed NLL and its gradient, against a float64 log-softmax written out here.
#include "train/preference_loss.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "tensor/error.h"

namespace fitgrad::train {
namespace {

nlohmann::json golden_cases() {
  std::ifstream in(FITGRAD_GOLDEN_DIR "/preference/cases.json");
  EXPECT_TRUE(in) << "tests/golden/preference/cases.json is missing";
  return nlohmann::json::parse(in).at("cases");
}

PreferenceConfig config_of(const nlohmann::json& c) {
  return {parse_objective(c.at("objective").get<std::string>()),
          parse_dpo_loss(c.at("loss_type").get<std::string>()), c.at("beta").get<double>(),
          c.at("label_smoothing").get<double>()};
}

TEST(PreferenceLoss, EqualsTorchOnThePublishedFormulas) {
  const nlohmann::json cases = golden_cases();
  ASSERT_EQ(cases.size(), 8u);
  for (const nlohmann::json& c : cases) {
    SCOPED_TRACE(c.at("objective").get<std::string>() + " " + c.at("loss_type").get<std::string>());
    const auto nll = c.at("nll").get<std::vector<double>>();
    const auto ref = c.at("ref_nll").get<std::vector<double>>();
    const auto counts = c.at("counts").get<std::vector<int64_t>>();
    const PreferenceTerms t = preference_terms(config_of(c), nll, ref, counts);
    const auto near = [](double got, double want) {
      EXPECT_NEAR(got, want, 1e-12 * std::max(1.0, std::fabs(want)));
    };
    near(t.loss, c.at("loss").get<double>());
    const auto grad = c.at("grad").get<std::vector<double>>();
    ASSERT_EQ(t.grad.size(), grad.size());
    for (size_t i = 0; i < grad.size(); ++i) near(t.grad[i], grad[i]);
    const auto pairs = double(t.stats.pairs);
    ASSERT_EQ(t.stats.pairs, int64_t(nll.size() / 2));
    near(t.stats.reward_chosen / pairs, c.at("rewards_chosen").get<double>());
    near(t.stats.reward_rejected / pairs, c.at("rewards_rejected").get<double>());
    near(t.stats.accuracy / pairs, c.at("rewards_accuracies").get<double>());
    near(t.stats.margin / pairs, c.at("rewards_margins").get<double>());
    near(t.stats.logps_chosen / pairs, c.at("logps_chosen").get<double>());
    near(t.stats.logps_rejected / pairs, c.at("logps_rejected").get<double>());
    if (c.at("objective") == "orpo") {
      near(t.stats.nll, c.at("nll_loss").get<double>());
      near(t.stats.log_odds_ratio / pairs, c.at("log_odds_ratio").get<double>());
      near(t.stats.log_odds_chosen / pairs, c.at("log_odds_chosen").get<double>());
    }

    // Through autograd: the loss on a tensor of NLLs and the gradient the backward gives them.
    const Tensor x = Tensor::from_vector(nll, {int64_t(nll.size())}, DType::f32);
    autograd::set_requires_grad(x);
    PreferenceStats stats;
    const Tensor loss = preference_loss(x, ref, counts, config_of(c), &stats);
    std::vector<double> rounded(nll.size());
    for (size_t i = 0; i < nll.size(); ++i) rounded[i] = double(float(nll[i]));
    const PreferenceTerms at_f32 = preference_terms(config_of(c), rounded, ref, counts);
    EXPECT_NEAR(loss.item(), at_f32.loss, 1e-6 * std::max(1.0, std::fabs(at_f32.loss)));
    EXPECT_EQ(stats.pairs, t.stats.pairs);
    autograd::backward(autograd::scale(loss, 2.0));
    const std::vector<float> g = autograd::grad(x).to_vector<float>();
    for (size_t i = 0; i < g.size(); ++i)
      EXPECT_NEAR(g[i], 2 * at_f32.grad[i], 1e-6 * std::max(1.0, std::fabs(2 * at_f32.grad[i])));
  }
  EXPECT_THROW(parse_dpo_loss("kto"), Error);
  EXPECT_THROW(parse_objective("ppo"), Error);
}

// The gradient at a point where the hinge is inactive for some pairs is zero for them.
TEST(PreferenceLoss, HingePairsPastTheMarginHaveNoGradient) {
  const PreferenceConfig cfg{Objective::dpo, DpoLoss::hinge, 1.0, 0.0};
  // Rows: chosen 0, chosen 1, rejected 0, rejected 1. Pair 0's chosen NLL is 3 below its
  // reference, its rejected one at it: d = 3, past the margin of 1/beta. Pair 1: d = 0, a
  // loss of 1 whose gradient is -beta d d / d nll / B: +1/2 for chosen, -1/2 for rejected.
  const std::vector<double> nll = {1, 5, 10, 5}, ref = {4, 5, 10, 5};
  const PreferenceTerms t = preference_terms(cfg, nll, ref, std::vector<int64_t>{3, 3, 3, 3});
  EXPECT_EQ(t.grad[0], 0.0);
  EXPECT_EQ(t.grad[2], 0.0);
  EXPECT_EQ(t.grad[1], 0.5);
  EXPECT_EQ(t.grad[3], -0.5);
  EXPECT_DOUBLE_EQ(t.loss, 0.5);
}

// Note [A sure answer's odds]: ORPO with a chosen answer the model is sure of (its NLL 0) and
// a rejected one it is sure of too: a finite loss, the clamped answers pass no odds gradient,
// and the chosen NLL term keeps its own; just below the clamp the loss is continuous.
TEST(PreferenceLoss, OrpoStaysFiniteOnAnAnswerTheModelIsSureOf) {
  const PreferenceConfig cfg{Objective::orpo, DpoLoss::sigmoid, 0.1, 0.0};
  const std::vector<int64_t> counts = {4, 4, 4, 4};
  const std::vector<double> ref;
  const PreferenceTerms sure = preference_terms(cfg, std::vector<double>{0, 2, 3, 0}, ref, counts);
  EXPECT_TRUE(std::isfinite(sure.loss));
  for (const double g : sure.grad) EXPECT_TRUE(std::isfinite(g));
  EXPECT_EQ(sure.grad[0], 1.0 / 8);  // chosen 0: the NLL term's 1 / (chosen tokens) alone
  EXPECT_EQ(sure.grad[3], 0.0);      // rejected 1: clamped, and no NLL term
  const PreferenceTerms near =
      preference_terms(cfg, std::vector<double>{4e-9, 2, 3, 4e-9}, ref, counts);
  EXPECT_NEAR(near.loss, sure.loss, 1e-9);  // the NLL term moves by 4e-9 / 8
}

// n positions of random logits over V and their targets, every `every`-th one (from `first`)
// ignored (-100).
struct RandomPositions {
  std::vector<float> logits;     // (n, V)
  std::vector<int64_t> targets;  // (n)
  RandomPositions(int64_t n, int64_t V, unsigned seed, size_t every, size_t first)
      : logits(size_t(n * V)), targets(size_t(n)) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0, 2);
    for (float& x : logits) x = normal(rng);
    for (size_t i = 0; i < targets.size(); ++i)
      targets[i] = i % every == first ? -100 : int64_t(rng() % uint32_t(V));
  }
};

// Each sequence's summed NLL over its kept targets, and its gradient g_s (softmax - onehot)
// on those rows, zero on ignored ones, against float64; the in-place path equals the other.
TEST(SequenceNll, SumsEachSequenceAndItsGradientAgainstFloat64) {
  const int64_t S = 3, T = 5, V = 11;
  const RandomPositions data(S * T, V, 4, 4, 1);
  const std::vector<float>& logits = data.logits;
  const std::vector<int64_t>& targets = data.targets;
  const std::vector<float> g = {0.5f, -1.25f, 2.0f};
  for (const bool hold_logits : {true, false}) {
    SCOPED_TRACE(hold_logits ? "logits held by the caller" : "logits in place");
    Tensor x = Tensor::from_vector(logits, {S, T, V}, DType::f32);
    const Tensor leaf = x;
    autograd::set_requires_grad(leaf);
    Tensor y = autograd::scale(leaf, 1.0);  // a non-leaf the node may take over
    const Tensor nll = autograd::sequence_nll(y, Tensor::from_vector(targets, {S, T}, DType::i64));
    if (!hold_logits) y = Tensor();
    ASSERT_EQ(nll.shape(), Shape({S}));
    const std::vector<float> got = nll.to_vector<float>();
    std::vector<double> want(size_t(S), 0.0), dlogits(size_t(S * T * V), 0.0);
    for (int64_t s = 0; s < S; ++s)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t target = targets[size_t(s * T + t)];
        if (target == -100) continue;
        const float* row = logits.data() + (s * T + t) * V;
        double mx = row[0], sum = 0;
        for (int64_t v = 0; v < V; ++v) mx = std::max(mx, double(row[v]));
        for (int64_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - mx);
        const double lse = mx + std::log(sum);
        want[size_t(s)] += lse - double(row[target]);
        for (int64_t v = 0; v < V; ++v)
          dlogits[size_t((s * T + t) * V + v)] =
              double(g[size_t(s)]) * (std::exp(double(row[v]) - lse) - (v == target ? 1 : 0));
      }
    for (int64_t s = 0; s < S; ++s) EXPECT_NEAR(got[size_t(s)], want[size_t(s)], 1e-4);
    autograd::backward(autograd::sum(autograd::mul(nll, Tensor::from_vector(g, {S}))));
    const std::vector<float> d = autograd::grad(leaf).to_vector<float>();
    for (size_t i = 0; i < d.size(); ++i) ASSERT_NEAR(d[i], dlogits[i], 1e-5) << i;
    // bf16 logits (autocast's head): the gradient comes back in bf16, beside the logits.
    const Tensor half = Tensor::from_vector(logits, {S, T, V}, DType::f32);
    autograd::set_requires_grad(half);
    const Tensor nll16 = autograd::sequence_nll(autograd::cast(half, DType::bf16),
                                                Tensor::from_vector(targets, {S, T}, DType::i64));
    autograd::backward(autograd::sum(autograd::mul(nll16, Tensor::from_vector(g, {S}))));
    const std::vector<float> d16 = autograd::grad(half).to_vector<float>();
    for (size_t i = 0; i < d16.size(); ++i) ASSERT_NEAR(d16[i], dlogits[i], 2e-2) << i;
  }
}

// Spans of packed rows (Note [Packed pairs] in data/loader.cpp): each span's summed NLL and its
// gradient against float64, in the spans' order whatever their rows, and a zero gradient on
// the positions no span covers, also when the gradient is written over the logits.
TEST(SequenceNll, SpansOfPackedRowsSumEachSequenceAndLeaveTheRestAtZero) {
  const int64_t R = 2, T = 6, V = 7;
  const RandomPositions data(R * T, V, 9, 5, 3);
  const std::vector<float>& logits = data.logits;
  const std::vector<int64_t>& targets = data.targets;
  // Row 0: [1, 4) and [4, 6), position 0 uncovered; row 1: [0, 2) and [3, 6), 2 uncovered.
  const std::vector<RowSpan> spans = {{1, 0, 2}, {0, 1, 4}, {1, 3, 6}, {0, 4, 6}};
  const std::vector<float> g = {0.5f, -1.25f, 2.0f, 0.75f};
  std::vector<double> want(spans.size(), 0.0), dlogits(logits.size(), 0.0);
  for (size_t s = 0; s < spans.size(); ++s)
    for (int64_t t = spans[s].begin; t < spans[s].end; ++t) {
      const int64_t k = spans[s].row * T + t, target = targets[size_t(k)];
      if (target == -100) continue;
      const float* row = logits.data() + k * V;
      double mx = row[0], sum = 0;
      for (int64_t v = 0; v < V; ++v) mx = std::max(mx, double(row[v]));
      for (int64_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - mx);
      const double lse = mx + std::log(sum);
      want[s] += lse - double(row[target]);
      for (int64_t v = 0; v < V; ++v)
        dlogits[size_t(k * V + v)] =
            double(g[s]) * (std::exp(double(row[v]) - lse) - (v == target ? 1 : 0));
    }
  for (const bool hold_logits : {true, false}) {
    SCOPED_TRACE(hold_logits ? "logits held by the caller" : "logits in place");
    const Tensor leaf = Tensor::from_vector(logits, {R, T, V}, DType::f32);
    autograd::set_requires_grad(leaf);
    Tensor y = autograd::scale(leaf, 1.0);
    const Tensor nll =
        autograd::sequence_nll(y, Tensor::from_vector(targets, {R, T}, DType::i64), spans);
    if (!hold_logits) y = Tensor();
    ASSERT_EQ(nll.shape(), Shape({int64_t(spans.size())}));
    const std::vector<float> got = nll.to_vector<float>();
    for (size_t s = 0; s < spans.size(); ++s) EXPECT_NEAR(got[s], want[s], 1e-4) << s;
    autograd::backward(
        autograd::sum(autograd::mul(nll, Tensor::from_vector(g, {int64_t(g.size())}))));
    const std::vector<float> d = autograd::grad(leaf).to_vector<float>();
    for (size_t i = 0; i < d.size(); ++i) ASSERT_NEAR(d[i], dlogits[i], 1e-5) << i;
  }
  const Tensor x = Tensor::from_vector(logits, {R, T, V}, DType::f32);
  const Tensor y = Tensor::from_vector(targets, {R, T}, DType::i64);
  const std::vector<RowSpan> overlapping = {{0, 0, 3}, {0, 2, 4}};
  EXPECT_THROW(autograd::sequence_nll(x, y, overlapping), Error);
  const std::vector<RowSpan> outside = {{2, 0, 3}};
  EXPECT_THROW(autograd::sequence_nll(x, y, outside), Error);
}

}  // namespace
}  // namespace fitgrad::train
