// Sampling (nn/sampling.h) against hand-computed distributions: temperature 0 and top_k 1
// are the argmax, top-k and top-p keep exactly the sets Hugging Face's warpers keep,
// 20000 draws follow the renormalised distribution (a chi-square bound), a seed fixes the
// draws, and out-of-range options are refused.
#include "nn/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::nn {
namespace {

using fitgrad::testing::expect_error;

Tensor logits_of(const std::vector<double>& v) {
  return Tensor::from_vector(v, {int64_t(v.size())}, DType::f32);
}

// Logits whose softmax is exactly `p` (up to rounding): log p.
Tensor logits_for(const std::vector<double>& p) {
  std::vector<double> l;
  for (double x : p) l.push_back(std::log(x));
  return logits_of(l);
}

TEST(Sampling, GreedyIsTheArgmaxAndTopK1IsGreedy) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal;
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<double> l(97);
    for (double& x : l) x = 3 * normal(rng);
    const int32_t want = int32_t(std::max_element(l.begin(), l.end()) - l.begin());
    Generator g(trial);
    EXPECT_EQ(sample_token(logits_of(l), {.temperature = 0}, g), want);
    EXPECT_EQ(sample_token(logits_of(l), {.temperature = 0.7, .top_k = 1}, g), want);
    EXPECT_EQ(sample_token(logits_of(l), {.temperature = 1.0, .top_p = 1e-6}, g), want);
  }
}

TEST(Sampling, TemperatureScalesTheLogits) {
  const std::vector<double> l{1.0, 2.0, 0.5};
  const std::vector<double> p = sampling_distribution(logits_of(l), {.temperature = 0.5});
  double z = 0;
  for (double x : l) z += std::exp(x / 0.5);
  for (size_t i = 0; i < l.size(); ++i) EXPECT_NEAR(p[i], std::exp(l[i] / 0.5) / z, 1e-7);
}

struct FilterCase {
  const char* name;
  std::vector<double> probs;
  int64_t top_k;
  double top_p;
  std::vector<int> kept;  // ids with nonzero probability
};

class SamplingFilter : public ::testing::TestWithParam<FilterCase> {};

TEST_P(SamplingFilter, KeepsExactlyTheExpectedSetRenormalised) {
  const FilterCase& c = GetParam();
  const std::vector<double> p =
      sampling_distribution(logits_for(c.probs), {.top_k = c.top_k, .top_p = c.top_p});
  double kept_mass = 0;
  for (int id : c.kept) kept_mass += c.probs[size_t(id)];
  for (size_t i = 0; i < p.size(); ++i) {
    const bool kept = std::find(c.kept.begin(), c.kept.end(), int(i)) != c.kept.end();
    EXPECT_NEAR(p[i], kept ? c.probs[i] / kept_mass : 0.0, 1e-6) << c.name << " id " << i;
  }
}

// Probabilities by id: 0.05 0.40 0.10 0.25 0.20 (descending: 1, 3, 4, 2, 0).
const std::vector<double> kProbs{0.05, 0.40, 0.10, 0.25, 0.20};

INSTANTIATE_TEST_SUITE_P(
    HandMade, SamplingFilter,
    ::testing::Values(FilterCase{"top_k_2", kProbs, 2, 1.0, {1, 3}},
                      FilterCase{"top_k_4", kProbs, 4, 1.0, {1, 2, 3, 4}},
                      FilterCase{"top_k_beyond_vocab", kProbs, 9, 1.0, {0, 1, 2, 3, 4}},
                      // Cumulative 0.40, 0.65, 0.85, 0.95, 1.0: the smallest prefix reaching top_p.
                      FilterCase{"top_p_0.5", kProbs, 0, 0.5, {1, 3}},
                      FilterCase{"top_p_0.649", kProbs, 0, 0.649, {1, 3}},
                      FilterCase{"top_p_0.7", kProbs, 0, 0.7, {1, 3, 4}},
                      FilterCase{"top_p_0.9", kProbs, 0, 0.9, {1, 2, 3, 4}},
                      FilterCase{"top_p_0.3_keeps_one", kProbs, 0, 0.3, {1}},
                      // top-k first, then top-p over the renormalised three (0.47, 0.29, 0.24).
                      FilterCase{"top_k_3_then_top_p_0.7", kProbs, 3, 0.7, {1, 3}},
                      FilterCase{"top_k_3_then_top_p_0.8", kProbs, 3, 0.8, {1, 3, 4}}),
    [](const auto& info) {
      std::string n = info.param.name;
      for (char& ch : n)
        if (ch == '.') ch = '_';
      return n;
    });

TEST(Sampling, DrawFrequenciesMatchTheRenormalisedDistribution) {
  // 8 tokens; top_k 6 and top_p 0.9 leave a known subset, then 20000 draws.
  const std::vector<double> probs{0.02, 0.30, 0.05, 0.18, 0.12, 0.08, 0.22, 0.03};
  const SamplingOptions opt{.temperature = 1.0, .top_k = 6, .top_p = 0.9};
  const std::vector<double> p = sampling_distribution(logits_for(probs), opt);
  // Kept: 1 (0.30), 6 (0.22), 3 (0.18), 4 (0.12), 5 (0.08): cumulative over the top six
  // (mass 0.95) reaches 0.9 at the fifth.
  const std::vector<int> kept{1, 3, 4, 5, 6};
  const int n = 20000;
  std::vector<int> count(probs.size(), 0);
  Generator g(42);
  for (int i = 0; i < n; ++i) ++count[size_t(sample_token(logits_for(probs), opt, g))];
  double kept_mass = 0;
  for (int id : kept) kept_mass += probs[size_t(id)];
  double chi2 = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    const bool is_kept = std::find(kept.begin(), kept.end(), int(i)) != kept.end();
    if (!is_kept) {
      EXPECT_EQ(count[i], 0) << "id " << i << " was filtered out";
      continue;
    }
    const double expected = n * probs[i] / kept_mass;
    EXPECT_NEAR(p[i], probs[i] / kept_mass, 1e-6);
    chi2 += (count[i] - expected) * (count[i] - expected) / expected;
  }
  // 4 degrees of freedom: P(chi2 > 18.47) = 0.001.
  EXPECT_LT(chi2, 18.47);
  EXPECT_EQ(g.state().offset, uint64_t(n));  // one draw per sampled token
}

TEST(Sampling, TheSameSeedGivesTheSameTokens) {
  std::vector<double> l(50);
  for (size_t i = 0; i < l.size(); ++i) l[i] = std::sin(double(i));
  auto run = [&](uint64_t seed) {
    Generator g(seed);
    std::vector<int32_t> out;
    for (int i = 0; i < 200; ++i) out.push_back(sample_token(logits_of(l), {.top_p = 0.95}, g));
    return out;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST(Sampling, RefusesOptionsOutOfRange) {
  const Tensor l = logits_of({0.0, 1.0});
  Generator g(0);
  expect_error([&] { sample_token(l, {.temperature = -0.1}, g); }, "[sampling]",
               "temperature must be >= 0");
  expect_error([&] { sample_token(l, {.top_k = -1}, g); }, "[sampling]", "top_k must be >= 0");
  expect_error([&] { sample_token(l, {.top_p = 0.0}, g); }, "[sampling]",
               "top_p must be in (0, 1]");
  expect_error([&] { sample_token(l, {.top_p = 1.5}, g); }, "[sampling]",
               "top_p must be in (0, 1]");
  expect_error([&] { sample_token(Tensor::zeros({2, 2}), {}, g); }, "[sampling]", "1-d");
}

}  // namespace
}  // namespace fitgrad::nn
