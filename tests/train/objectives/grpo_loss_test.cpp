// GRPO's loss (train/objectives/grpo_loss.h) against TRL 1.16.0's GRPOTrainer
// (tests/golden/grpo/cases.json, gen_grpo_golden.py: TRL's own _compute_loss in float64):
// for every loss type, token and sequence importance sampling, beta 0 and > 0 with clipping
// active, each scale_rewards and mask_truncated_completions, off- and on-policy, the
// advantages, the loss, its gradient with respect to each token's log-probability and the
// logged statistics; the same loss through autograd; and the refusals of bad input.
#include "train/objectives/grpo_loss.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "tensor/error.h"

namespace fitgrad::train {
namespace {

const nlohmann::json& golden() {
  static const nlohmann::json j = [] {
    std::ifstream in(FITGRAD_GOLDEN_DIR "/grpo/cases.json");
    EXPECT_TRUE(in) << "tests/golden/grpo/cases.json is missing";
    return nlohmann::json::parse(in);
  }();
  return j;
}

GrpoConfig config_of(const nlohmann::json& c) {
  GrpoConfig cfg;
  cfg.loss_type = parse_grpo_loss_type(c.at("loss_type").get<std::string>());
  cfg.importance_sampling_level =
      parse_importance_sampling(c.at("importance_sampling_level").get<std::string>());
  cfg.scale_rewards = parse_reward_scaling(c.at("scale_rewards").get<std::string>());
  cfg.beta = c.at("beta").get<double>();
  cfg.epsilon = c.at("epsilon").get<double>();
  if (!c.at("epsilon_high").is_null()) cfg.epsilon_high = c.at("epsilon_high").get<double>();
  cfg.mask_truncated_completions = c.at("mask_truncated_completions").get<bool>();
  cfg.reward_weights = c.at("reward_weights").get<std::vector<double>>();
  cfg.max_completion_length = c.at("max_completion_length").get<int64_t>();
  cfg.num_generations = golden().at("G").get<int64_t>();
  return cfg;
}

std::vector<double> doubles(const nlohmann::json& j) {
  return j.is_null() ? std::vector<double>{} : j.get<std::vector<double>>();
}

// One case's inputs, built as an objective would: the advantages from the rewards, the mask
// through grpo_loss_mask, dapo's token count of the generation batch.
struct Case {
  GrpoConfig cfg;
  GrpoAdvantages adv;
  std::vector<double> logp, old_logp, ref_logp, mask, entropy;
  GrpoInputs in;
  int64_t accumulation = 1;
  explicit Case(const nlohmann::json& c) : cfg(config_of(c.at("config"))) {
    const nlohmann::json& set =
        golden().at("inputs").at(c.at("config").at("inputs").get<std::string>());
    const auto b = golden().at("B").get<int64_t>(), t = golden().at("T").get<int64_t>();
    logp = doubles(set.at("logp"));
    old_logp = doubles(set.at("old_logp"));
    ref_logp = doubles(set.at("ref_logp"));
    entropy = doubles(set.at("entropies"));
    adv = grpo_advantages(cfg, doubles(set.at("rewards")), 2);
    mask =
        grpo_loss_mask(cfg, doubles(set.at("mask")), set.at("truncated").get<std::vector<bool>>());
    in.rows = b;
    in.cols = t;
    in.old_logp = old_logp;
    in.ref_logp = ref_logp;
    in.mask = mask;
    in.advantages = adv.advantages;
    in.entropy = entropy;
    const nlohmann::json& k = c.at("config");
    accumulation = k.at("gradient_accumulation_steps").get<int64_t>();
    in.steps_per_generation = k.at("steps_per_generation").get<int64_t>();
    if (!k.at("num_items_in_batch").is_null())
      in.num_items_in_batch = k.at("num_items_in_batch").get<double>();
  }
};

std::string name_of(const nlohmann::json& c) {
  const nlohmann::json& k = c.at("config");
  return fmt::format("{} {} {} beta {} scale {} truncated-masked {}",
                     k.at("inputs").get<std::string>(), k.at("loss_type").get<std::string>(),
                     k.at("importance_sampling_level").get<std::string>(),
                     k.at("beta").get<double>(), k.at("scale_rewards").get<std::string>(),
                     k.at("mask_truncated_completions").get<bool>());
}

void near(double got, double want, const char* what, double tol = 1e-12) {
  EXPECT_NEAR(got, want, tol * std::max(1.0, std::fabs(want))) << what;
}

void expect_metric(const nlohmann::json& metrics, const char* key, double got) {
  if (!metrics.contains(key)) {
    EXPECT_TRUE(std::isnan(got)) << key << " is not logged by TRL here, got " << got;
    return;
  }
  if (metrics.at(key).is_null()) {
    EXPECT_TRUE(std::isnan(got)) << key << ": TRL logs NaN, got " << got;
    return;
  }
  // TRL makes some statistics in float32 (a sequence-level clip ratio divides by
  // torch.tensor(float(B)), a float32 count), so they agree to float32 rounding.
  near(got, metrics.at(key).get<double>(), key, 1e-7);
}

TEST(GrpoLoss, EqualsTrlForEveryLossTypeLevelAndBeta) {
  const nlohmann::json& cases = golden().at("cases");
  ASSERT_EQ(cases.size(), 32u);
  for (const nlohmann::json& c : cases) {
    SCOPED_TRACE(name_of(c));
    const Case k(c);
    const auto want_adv = doubles(c.at("advantages"));
    ASSERT_EQ(k.adv.advantages.size(), want_adv.size());
    for (size_t i = 0; i < want_adv.size(); ++i)
      near(k.adv.advantages[i], want_adv[i], "advantage");
    const GrpoTerms t = grpo_terms(k.cfg, k.logp, k.in);
    // TRL's loss is the micro-batch's divided by the accumulation steps (grpo_loss.h).
    const double scale = 1.0 / double(k.accumulation);
    near(t.loss * scale, c.at("loss").get<double>(), "loss");
    const auto grad = doubles(c.at("grad"));
    ASSERT_EQ(t.grad.size(), grad.size());
    for (size_t i = 0; i < grad.size(); ++i) near(t.grad[i] * scale, grad[i], "gradient");
    const nlohmann::json& m = c.at("metrics");
    expect_metric(m, "clip_ratio/low_mean", t.stats.clip_low_mean);
    expect_metric(m, "clip_ratio/high_mean", t.stats.clip_high_mean);
    expect_metric(m, "clip_ratio/region_mean", t.stats.clip_region_mean);
    expect_metric(m, "clip_ratio/low_min", t.stats.clip_low_min);
    expect_metric(m, "clip_ratio/high_max", t.stats.clip_high_max);
    expect_metric(m, "kl", t.stats.kl);
    expect_metric(m, "entropy", t.stats.entropy);
    expect_metric(m, "reward", k.adv.reward_mean);
    expect_metric(m, "reward_std", k.adv.reward_std);
    expect_metric(m, "frac_reward_zero_std", k.adv.frac_reward_zero_std);
  }
}

// The goldens exercise what they claim: clipping on both sides, a group without signal.
TEST(GrpoLoss, TheGoldenCasesClipOnBothSides) {
  bool low = false, high = false, zero_std = false;
  for (const nlohmann::json& c : golden().at("cases")) {
    const nlohmann::json& m = c.at("metrics");
    low |= m.at("clip_ratio/low_mean").get<double>() > 0;
    high |= m.at("clip_ratio/high_mean").get<double>() > 0;
    zero_std |= m.at("frac_reward_zero_std").get<double>() > 0;
  }
  EXPECT_TRUE(low && high && zero_std);
}

TEST(GrpoLoss, ThroughAutogradHandsTheGradientToTheLogProbabilities) {
  const nlohmann::json& c = golden().at("cases").at(1);
  const Case k(c);
  std::vector<float> f(k.logp.begin(), k.logp.end());
  Tensor logp = Tensor::from_vector(f, {k.in.rows, k.in.cols}, DType::f32);
  autograd::set_requires_grad(logp);
  GrpoStats stats;
  const Tensor loss = grpo_loss(logp, k.in, k.cfg, &stats);
  autograd::backward(loss);
  const std::vector<double> rounded(f.begin(), f.end());
  const GrpoTerms t = grpo_terms(k.cfg, rounded, k.in);
  EXPECT_FLOAT_EQ(float(loss.item()), float(t.loss));
  const std::vector<double> g = autograd::grad(logp).to_vector<double>();
  ASSERT_EQ(g.size(), t.grad.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_FLOAT_EQ(float(g[i]), float(t.grad[i])) << i;
  EXPECT_EQ(stats.clip_region_mean, t.stats.clip_region_mean);
}

TEST(GrpoLoss, BadInputIsRefusedByName) {
  GrpoConfig cfg;
  EXPECT_THROW(parse_grpo_loss_type("ppo"), Error);
  EXPECT_THROW(parse_importance_sampling("token_level"), Error);
  EXPECT_THROW(parse_reward_scaling("yes"), Error);
  cfg.num_generations = 4;
  try {
    grpo_advantages(cfg, std::vector<double>(6, 1.0), 1);
    FAIL() << "6 completions in groups of 4";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--num_generations 4"), std::string::npos) << e.what();
  }
  cfg.beta = 0.1;
  const std::vector<double> logp(4, -1.0), mask(4, 1.0), adv(2, 0.5);
  GrpoInputs in;
  in.rows = 2;
  in.cols = 2;
  in.mask = mask;
  in.advantages = adv;
  try {
    grpo_terms(cfg, logp, in);
    FAIL() << "beta without reference log-probabilities";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reference"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fitgrad::train
